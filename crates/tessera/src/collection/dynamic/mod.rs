//! Dynamic collections: read and write a collection without its Rust type, from the schema
//! and the shared-key table stored in the database. The `tessera` command is built on them.
//!
//! Records go in and come out as [`Value`]s (or JSON text). A write is checked against the
//! stored shape first: a wrong type, a missing required field or an unknown field is
//! [`Error::SchemaViolation`] naming the collection, the key and the field path, with nothing
//! written. It then takes the write path typed handles take ([`CollectionState::store`]):
//! the same shared keys, index entries, unique checks, checksums and change feed.
//!
//! ```
//! use tessera::collection::Record;
//! use tessera::value::{from_json, Doc};
//!
//! #[derive(serde::Serialize, serde::Deserialize, Record)]
//! #[record(name = "notes")]
//! struct Note {
//!     #[record(key)]
//!     id: u32,
//!     text: String,
//! }
//!
//! # let dir = tempfile::tempdir().unwrap();
//! let db = tessera::Db::open(dir.path().join("db"))?;
//! let typed = db.collection::<Note>()?;
//! db.write(|tx| typed.insert(tx, &Note { id: 1, text: "typed".into() }))?;
//!
//! let notes = db.dyn_collection("notes")?;
//! let record = from_json(br#"{"id": 2, "text": "dynamic"}"#).unwrap();
//! db.write(|tx| notes.insert(tx, Doc::from_untrusted(&record)?.root()))?;
//! assert_eq!(typed.get(&db, &2u32)?.unwrap().text, "dynamic");
//! assert_eq!(notes.get_json(&db, "1")?.unwrap().to_json(), r#"{"id":1,"text":"typed"}"#);
//!
//! let wrong = from_json(br#"{"id": 3, "text": 7}"#).unwrap();
//! let error = db.write(|tx| notes.insert(tx, Doc::from_untrusted(&wrong)?.root())).unwrap_err();
//! assert!(matches!(error, tessera::Error::SchemaViolation { ref path, .. } if path == "text"));
//! assert_eq!(notes.all().count(&db)?, 2);
//! # Ok::<(), tessera::Error>(())
//! ```
//!
//! **Keys.** A record type's primary key is encoded with its fields' Rust widths. The stored
//! shape holds them for a collection a record type stored ([`TypeDesc::Integer`]); for one
//! stored before widths were recorded (`TypeDesc::Int`, any integer), a handle reads them
//! from the schema when a dynamic handle created the collection
//! ([`Db::create_dyn_collection`]), or learns them from up to 16 stored records
//! ([`KeyKind`]). Until it knows them, for an empty collection with an integer or float key,
//! reads by key find nothing (there is nothing) and writes are refused.
//!
//! **Integer widths of other fields.** A write of an integer out of its field's range (300
//! for a `u8`) is refused, naming the field ([`Error::SchemaViolation`]), and nothing is written.
//! A schema stored before widths were recorded (`TypeDesc::Int`) takes any 64-bit integer;
//! the record type's next open records the widths.
//!
//! **Queries** ([`DynQuery`]) are type-checked against the stored shape and planned and run by
//! the engine typed queries use: the same primary-key lookups and ranges (from the stored key
//! kinds; a handle that does not know them scans), ready indexes, index walks for an order,
//! and the same `explain` text. Only a constant that converts exactly to a key field's type
//! is looked up by key (300 for a `u8` key, or a string for an integer key, is a filter).

mod catalog;
mod conform;
mod conform_into;
mod conformed;
mod key_kind;
mod live;
mod query;
mod salvage;
mod stored;

pub use catalog::Catalog;
pub use key_kind::KeyKind;
pub use query::DynQuery;
pub use salvage::{SALVAGE_FORMAT_VERSION_MIN, SALVAGE_SKIPPED_MAX, SalvageReport, SalvageSink, SkipReason, SkippedEntry, salvage};

use super::keys::{self, RecordKeys};
use super::schema::{StoredIndex, StoredSchema};
use super::{COLLECTION_NAME_LEN_MAX, CollectionState, IndexState, SCHEMA_KEYSPACE, TypeDesc, WriteOutcome};
use crate::Db;
use crate::error::{Error, Result};
use crate::store::{ReadSource, Snapshot, WriteTxn};
use conform::{ConformError, Misfit, Source};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use tessera_value::{Doc, Value};

/// Where a key given to a read is named in a [`Error::SchemaViolation`].
const KEY_PATH: &str = "$key";

/// A collection's stored schema, as a dynamic handle reads it and `tessera export` writes it.
///
/// ```
/// # use tessera::collection::Record;
/// # #[derive(serde::Serialize, serde::Deserialize, Record)]
/// # #[record(name = "tags")]
/// # struct Tag { #[record(key)] name: String, #[record(index)] uses: u32 }
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = tessera::Db::open(dir.path().join("db"))?;
/// # db.collection::<Tag>()?;
/// let schema = db.dyn_collection("tags")?.schema().clone();
/// assert_eq!(schema.key_fields, ["name"]);
/// assert_eq!(schema.indexes[0].path, "uses");
/// # Ok::<(), tessera::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DynSchema {
    /// The record type's version.
    pub version: u32,
    /// Paths of the primary key's fields, in key order.
    pub key_fields: Vec<String>,
    /// Each key field's encoding, when known (see the module docs, "Keys").
    pub key_kinds: Vec<KeyKind>,
    /// The records' shape.
    pub shape: TypeDesc,
    /// Secondary and unique indexes.
    pub indexes: Vec<DynIndex>,
}

/// One index of a collection.
///
/// ```
/// let index = tessera::collection::DynIndex { path: "age".into(), unique: false, ready: true, failure: None };
/// assert!(index.ready);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DynIndex {
    /// Dotted path of the indexed field.
    pub path: String,
    /// Whether two records may not share a non-null value.
    pub unique: bool,
    /// Built for every record; a new index builds in the background.
    pub ready: bool,
    /// Why the index's last background build stopped (for example a record with more array
    /// elements than a multi-entry index takes), while it is not ready; `None` otherwise. Any
    /// process that opens the collection may build it again.
    pub failure: Option<String>,
}

impl DynSchema {
    fn from_stored(stored: &StoredSchema) -> DynSchema {
        DynSchema {
            version: stored.version,
            key_fields: stored.key_fields.clone(),
            key_kinds: stored.key_kinds.clone(),
            shape: stored.shape.clone(),
            indexes: stored
                .indexes
                .iter()
                .map(|index| DynIndex {
                    path: index.path.clone(),
                    unique: index.unique,
                    ready: index.ready,
                    failure: index.failure.clone().filter(|_| !index.ready),
                })
                .collect(),
        }
    }

    /// Why this schema cannot describe a collection, if it cannot.
    fn problem(&self) -> Option<String> {
        if self.key_fields.is_empty() {
            return Some("no key field".into());
        }
        if self.key_kinds.len() != self.key_fields.len() {
            return Some(format!("{} key kinds for {} key fields", self.key_kinds.len(), self.key_fields.len()));
        }
        for (path, kind) in self.key_fields.iter().zip(&self.key_kinds) {
            let Some(desc) = self.shape.resolve(path) else { return Some(format!("key field `{path}` is not a field")) };
            if !KeyKind::candidates(desc).contains(kind) {
                return Some(format!("key field `{path}` of shape {desc:?} cannot be encoded as {}", kind.name()));
            }
        }
        self.indexes.iter().find_map(|index| super::build::index_path_problem(&self.shape, &index.path, index.unique))
    }
}

/// One record read through a dynamic handle, with its stored primary key: its document as
/// stored, read through the collection's shared keys, and copied into a standalone document
/// (no shared keys) when [`DynRecord::bytes`] first asks for one. A dict's entries come in the
/// order of their key ids, so [`DynRecord::value`] and [`DynRecord::to_json`] give a stored
/// record's fields in the collection's shared-key order, and the standalone copy may order a
/// nested dict's entries otherwise; equality compares content, not order.
///
/// ```
/// # use tessera::collection::Record;
/// # #[derive(serde::Serialize, serde::Deserialize, Record)]
/// # #[record(name = "tags")]
/// # struct Tag { #[record(key)] name: String }
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = tessera::Db::open(dir.path().join("db"))?;
/// # let tags = db.collection::<Tag>()?;
/// # db.write(|tx| tags.insert(tx, &Tag { name: "rust".into() }))?;
/// let record = db.dyn_collection("tags")?.get_json(&db, r#""rust""#)?.unwrap();
/// assert_eq!(record.value().get("name").unwrap().as_str(), Some("rust"));
/// assert_eq!(record.to_json(), r#"{"name":"rust"}"#);
/// # Ok::<(), tessera::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct DynRecord {
    key: Vec<u8>,
    body: Body,
}

/// A record's document: standalone, or as it was stored, with the shared-key table it was read
/// through (append-only, so the record's key ids keep their names) and, once asked for, its
/// standalone copy. A record read from storage is kept as stored: a live subscription or a
/// reader that reads fields never pays for the copy, which costs more than the read.
#[derive(Debug, Clone)]
enum Body {
    Standalone(Vec<u8>),
    Stored { bytes: Vec<u8>, keys: Arc<tessera_value::SharedKeys>, standalone: std::sync::OnceLock<Vec<u8>> },
}

/// Equal records have the same key and equal content (`Value`'s deep equality: dicts as maps),
/// however each was read; nothing is copied to compare them.
impl PartialEq for DynRecord {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key && self.value() == other.value()
    }
}
impl Eq for DynRecord {}

/// The record of `collection` stored at `key` as `bytes`, opened under the database's checksum
/// policy, with its key fields compared with `key` (see [`DynRecord::read`]): every read of the
/// dynamic handle opens records through this.
pub(crate) fn open_checked<'a>(collection: &'a CollectionState, key: &[u8], bytes: &'a [u8]) -> Result<Doc<'a>> {
    let doc = collection.open_record(key, bytes)?;
    if let Some(kinds) = collection.key_kinds.get() {
        check_stored_key(collection, kinds, key, doc.root())?;
    }
    Ok(doc)
}

/// [`Error::RecordDecode`] if `record`'s key fields, encoded by `kinds`, are not `key`.
fn check_stored_key(collection: &CollectionState, kinds: &[KeyKind], key: &[u8], record: Value<'_>) -> Result<()> {
    let fields = collection.schema_watch.key_fields();
    crate::collection::with_key_buffer(|given| {
        given.clear();
        let encoded = fields.iter().zip(kinds).all(|(field, kind)| {
            crate::query::lookup(record, field).is_some_and(|part| !part.is_null() && kind.encode(part, given).is_ok())
        });
        if encoded && given.as_slice() == key {
            return Ok(());
        }
        let fields: Vec<&str> = fields.iter().map(String::as_str).collect();
        Err(crate::collection::key_mismatch(collection, &fields, key, encoded.then_some(given.as_slice())))
    })
}

impl DynRecord {
    /// A record whose document is standalone (no shared keys).
    pub(crate) fn standalone(key: Vec<u8>, bytes: Vec<u8>) -> DynRecord {
        DynRecord { key, body: Body::Standalone(bytes) }
    }

    /// A record of `collection` read from its stored value `bytes` (without the checksum),
    /// which has been opened with the collection's shared keys: kept as stored.
    pub(crate) fn stored(collection: &CollectionState, key: &[u8], bytes: &[u8]) -> DynRecord {
        let body = Body::Stored { bytes: bytes.to_vec(), keys: collection.keys.shared.clone(), standalone: std::sync::OnceLock::new() };
        DynRecord { key: key.to_vec(), body }
    }

    /// The record of `collection` stored at `key` as `bytes`, opened under the database's
    /// checksum policy (`CollectionState::open_record`): an error that names the collection
    /// and the key if it does not open.
    ///
    /// A record whose key fields give another key than `key` is [`Error::RecordDecode`] naming
    /// both, as a typed read's is (`collection::decode`): only a foreign writer, or damage that
    /// kept the value's checksum, stores one. The key fields are compared once their encodings
    /// are known (`CollectionState::key_kinds`; until then no key can be looked up either).
    pub(crate) fn read(collection: &CollectionState, key: &[u8], bytes: &[u8]) -> Result<DynRecord> {
        open_checked(collection, key, bytes)?;
        Ok(DynRecord::stored(collection, key, bytes))
    }

    /// The record's root value.
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(Record)]
    /// # struct Tag { #[record(key)] name: String, uses: u32 }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let typed = db.collection::<Tag>()?;
    /// # db.write(|tx| typed.insert(tx, &Tag { name: "rust".into(), uses: 3 }))?;
    /// let tags = db.dyn_collection("Tag")?;
    /// let record = tags.all().fetch(&db)?.remove(0);
    /// assert_eq!(record.value().get("uses").and_then(|uses| uses.as_u64()), Some(3));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn value(&self) -> Value<'_> {
        let doc = match &self.body {
            Body::Standalone(bytes) => Doc::from_trusted(bytes),
            // Opened (validated or checksum-checked) when the record was read.
            Body::Stored { bytes, keys, .. } => Doc::from_trusted_with_keys(bytes, keys),
        };
        doc.expect("a DynRecord holds encoder output").root()
    }

    /// The record as compact JSON.
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(Record)]
    /// # struct Tag { #[record(key)] name: String, uses: u32 }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let typed = db.collection::<Tag>()?;
    /// # db.write(|tx| typed.insert(tx, &Tag { name: "rust".into(), uses: 3 }))?;
    /// let record = db.dyn_collection("Tag")?.all().fetch(&db)?.remove(0);
    /// assert_eq!(record.to_json(), r#"{"name":"rust","uses":3}"#);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn to_json(&self) -> String {
        self.value().to_json()
    }

    /// The record's binary document (without shared keys).
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(Record)]
    /// # struct Tag { #[record(key)] name: String, uses: u32 }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let typed = db.collection::<Tag>()?;
    /// # db.write(|tx| typed.insert(tx, &Tag { name: "rust".into(), uses: 3 }))?;
    /// let record = db.dyn_collection("Tag")?.all().fetch(&db)?.remove(0);
    /// let standalone = tessera::value::Doc::from_untrusted(record.bytes())?; // no shared keys needed
    /// assert_eq!(standalone.root().get("name").and_then(|name| name.as_str()), Some("rust"));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn bytes(&self) -> &[u8] {
        match &self.body {
            Body::Standalone(bytes) => bytes,
            Body::Stored { standalone, .. } => standalone.get_or_init(|| {
                // A copy of a valid document meets every limit the original met.
                plain(self.value()).expect("a stored record copies into a standalone document")
            }),
        }
    }

    /// The stored primary key's order-preserving encoding.
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(Record)]
    /// # struct Tag { #[record(key)] name: String, uses: u32 }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let typed = db.collection::<Tag>()?;
    /// # db.write(|tx| typed.insert(tx, &Tag { name: "rust".into(), uses: 3 }))?;
    /// let record = db.dyn_collection("Tag")?.all().fetch(&db)?.remove(0);
    /// assert_eq!(record.key_bytes(), tessera::store::key::encode("rust"));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn key_bytes(&self) -> &[u8] {
        &self.key
    }
}

/// A collection opened by name, without its record type: see the module docs.
///
/// ```
/// # use tessera::collection::Record;
/// # #[derive(Record)]
/// # struct Tag { #[record(key)] name: String, uses: u32 }
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = tessera::Db::open(dir.path().join("db"))?;
/// # db.collection::<Tag>()?;
/// let tags = db.dyn_collection("Tag")?; // no Rust type needed: the stored schema describes it
/// let record = tessera::value::from_json(br#"{"name": "go", "uses": 5}"#).unwrap();
/// db.write(|tx| tags.insert(tx, tessera::value::Doc::from_untrusted(&record)?.root()))?;
/// assert_eq!(tags.filter_text("uses > 1")?.count(&db)?, 1);
/// let wrong = tessera::value::from_json(br#"{"name": "c", "uses": "many"}"#).unwrap();
/// assert!(db.write(|tx| tags.insert(tx, tessera::value::Doc::from_untrusted(&wrong)?.root())).is_err(), "checked against the schema");
/// # Ok::<(), tessera::Error>(())
/// ```
#[derive(Clone)]
pub struct DynCollection {
    db: Db,
    state: Arc<CollectionState>,
    schema: Arc<DynSchema>,
    /// The key fields as paths, each resolved once in the collection's shared-key table: a
    /// written record's key is found by id, not by comparing field names.
    key_paths: Arc<[crate::query::FieldPath]>,
}

impl std::fmt::Debug for DynCollection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DynCollection({:?})", self.state.name)
    }
}

/// The keyspace `name` if the file has it, without creating it. Its handle comes from
/// [`Db::internal_keyspace`] (a committed open, cached), never from an open inside a read
/// transaction: LMDB closes the handles a read transaction opened when it ends, and a write
/// transaction that opened the same name meanwhile shares that handle, which then reads
/// whatever tree takes its slot next.
pub(super) fn keyspace_if_present(db: &Db, name: &str) -> Result<Option<crate::store::Keyspace>> {
    if db.keyspace_names()?.iter().any(|present| present == name) {
        return db.internal_keyspace(name).map(Some);
    }
    Ok(None)
}

/// Whether `key` has a size a stored key can have (LMDB refuses to look up any other).
fn stored_key_size(key: &[u8]) -> bool {
    !key.is_empty() && key.len() <= crate::store::KEY_LEN_MAX
}

/// A collection's stored schema and shared-key table, and the commit they were read at.
struct Loaded {
    stored: StoredSchema,
    shared: tessera_value::SharedKeys,
    /// The sequence of the snapshot they were read in: the schema is in effect from there on
    /// (a snapshot kept from before may hold an older one; see `schema_watch.rs`).
    read_at: u64,
}

/// The stored schema and shared-key table of `name`, if it has a schema.
fn load_stored(db: &Db, name: &str) -> Result<Option<Loaded>> {
    let Some(schemas) = keyspace_if_present(db, SCHEMA_KEYSPACE)? else { return Ok(None) };
    let keys_keyspace = keyspace_if_present(db, keys::KEYS_KEYSPACE)?;
    db.read(|tx| {
        let Some(bytes) = tx.get(&schemas, name.as_bytes())? else { return Ok(None) };
        let stored = tessera_value::from_slice::<StoredSchema>(bytes)
            .map_err(|error| Error::Corrupted(format!("schema of collection {name:?}: {error}")))?;
        let shared = match &keys_keyspace {
            Some(keyspace) => keys::load(tx, keyspace, name)?,
            None => tessera_value::SharedKeys::new(),
        };
        Ok(Some(Loaded { stored, shared, read_at: tx.sequence() }))
    })
}

/// Every struct field and enum variant name in `shape`, for a new collection's shared keys:
/// each struct's or enum's names together and in declaration order (as a record type
/// registers them), so that records list their fields in that order.
fn shape_names(shape: &TypeDesc, names: &mut Vec<String>) {
    let mut stack = vec![shape];
    while let Some(desc) = stack.pop() {
        match desc {
            TypeDesc::Option(inner) | TypeDesc::List(inner) | TypeDesc::Map(inner) => stack.push(inner),
            TypeDesc::Tuple(elements) => stack.extend(elements.iter().rev()),
            TypeDesc::Struct(fields) => {
                names.extend(fields.iter().map(|(name, _)| name.clone()));
                stack.extend(fields.iter().rev().map(|(_, field)| field));
            }
            TypeDesc::Enum(variants) => {
                names.extend(variants.iter().map(|(name, _)| name.clone()));
                stack.extend(variants.iter().rev().filter_map(|(_, payload)| payload.as_ref()));
            }
            _ => {}
        }
    }
}

impl Db {
    /// The collection `name`, opened from its stored schema without a record type;
    /// [`Error::NoSuchCollection`] if the database has none of that name. Works on a
    /// read-only handle.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// assert!(matches!(db.dyn_collection("missing"), Err(tessera::Error::NoSuchCollection { .. })));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn dyn_collection(&self, name: &str) -> Result<DynCollection> {
        crate::store::names::check("collection", name, COLLECTION_NAME_LEN_MAX)?;
        let Loaded { stored, shared, read_at } =
            load_stored(self, name)?.ok_or_else(|| Error::NoSuchCollection { collection: name.to_owned() })?;
        let state = self.shared_state_or(
            &format!("collection:{name}"),
            // A typed handle's state serves as well: it was made from the same schema.
            |_: &CollectionState| true,
            || dyn_state(self, name, &stored, shared, read_at).map(Arc::new),
        )?;
        let mut schema = DynSchema::from_stored(&stored);
        if schema.key_kinds.len() != schema.key_fields.len() {
            schema.key_kinds = learn_key_kinds(self, &state, &schema)?.unwrap_or_default();
        }
        if schema.key_kinds.len() == schema.key_fields.len() {
            // Errors of the shared write path show keys as values (a typed state's own
            // display comes first; a state that has kinds already keeps them).
            let _ = state.key_kinds.set(schema.key_kinds.clone());
        }
        let key_paths = schema.key_fields.iter().map(|field| crate::query::FieldPath::new(field)).collect();
        Ok(DynCollection { db: self.clone(), state, schema: Arc::new(schema), key_paths })
    }

    /// Creates the collection `name` with `schema` (every index built, since it is empty) and
    /// opens it; a collection of that name must not exist unless its stored schema is equal
    /// (then it is opened). `tessera import` creates collections this way from an export's
    /// header. [`Error::SchemaMismatch`] if the schema is not usable (a key field missing from
    /// the shape, key kinds that do not fit) or differs from the stored one.
    ///
    /// ```
    /// use tessera::collection::{DynSchema, KeyKind, TypeDesc};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let schema = DynSchema {
    ///     version: 1,
    ///     key_fields: vec!["id".into()],
    ///     key_kinds: vec![KeyKind::U32],
    ///     shape: TypeDesc::Struct(vec![("id".into(), TypeDesc::Int), ("name".into(), TypeDesc::String)]),
    ///     indexes: vec![],
    /// };
    /// let people = db.create_dyn_collection("people", &schema)?;
    /// db.write(|tx| people.insert_json(tx, br#"{"id": 7, "name": "Ada"}"#))?;
    /// assert_eq!(people.get_json(&db, "7")?.unwrap().to_json(), r#"{"id":7,"name":"Ada"}"#);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn create_dyn_collection(&self, name: &str, schema: &DynSchema) -> Result<DynCollection> {
        crate::store::names::check("collection", name, COLLECTION_NAME_LEN_MAX)?;
        if let Some(problem) = schema.problem() {
            return Err(Error::SchemaMismatch { collection: name.to_owned(), reason: problem });
        }
        let mut indexes = Vec::with_capacity(schema.indexes.len());
        for (id, index) in schema.indexes.iter().enumerate() {
            let id =
                u8::try_from(id).map_err(|_| Error::SchemaMismatch { collection: name.into(), reason: "more than 256 indexes".into() })?;
            indexes.push(StoredIndex { path: index.path.clone(), unique: index.unique, id, ready: true, failure: None });
        }
        let stored = StoredSchema {
            version: schema.version,
            key_fields: schema.key_fields.clone(),
            shape: schema.shape.clone(),
            indexes,
            key_kinds: schema.key_kinds.clone(),
        };
        let schemas = self.internal_keyspace(SCHEMA_KEYSPACE)?;
        let keys_keyspace = self.internal_keyspace(keys::KEYS_KEYSPACE)?;
        self.internal_keyspace(&format!("tessera.col.{name}"))?;
        self.internal_keyspace(&format!("tessera.idx.{name}"))?;
        let mut names = Vec::new();
        shape_names(&schema.shape, &mut names);
        self.write(|tx| {
            if let Some(bytes) = tx.get(&schemas, name.as_bytes())? {
                let existing = tessera_value::from_slice::<StoredSchema>(bytes)
                    .map_err(|error| Error::Corrupted(format!("schema of collection {name:?}: {error}")))?;
                let same = DynSchema { key_kinds: schema.key_kinds.clone(), ..DynSchema::from_stored(&existing) };
                // Indexes by path and uniqueness (their ids and build state are the store's).
                let indexes = |indexes: &[DynIndex]| {
                    let mut list: Vec<(String, bool)> = indexes.iter().map(|index| (index.path.clone(), index.unique)).collect();
                    list.sort_unstable();
                    list
                };
                if same.key_fields != schema.key_fields || same.shape != schema.shape || indexes(&same.indexes) != indexes(&schema.indexes)
                {
                    return Err(Error::SchemaMismatch {
                        collection: name.to_owned(),
                        reason: "a collection of this name exists with another schema (key fields, shape or indexes)".into(),
                    });
                }
                return Ok(());
            }
            let mut shared = keys::load(&*tx, &keys_keyspace, name)?;
            for field in &names {
                shared.add(field).map_err(|error| Error::SchemaMismatch {
                    collection: name.to_owned(),
                    reason: format!("field name {field:?} cannot be a shared key: {error}"),
                })?;
            }
            tx.put(&keys_keyspace, name.as_bytes(), &shared.to_bytes())?;
            tx.put(&schemas, name.as_bytes(), &tessera_value::to_vec(&stored)?)
        })?;
        self.dyn_collection(name)
    }
}

/// A stored key read with `kinds`, as JSON text (an array for a composite key); `None` if
/// the kinds are unknown (empty) or the bytes are not such a key.
pub(crate) fn display_key(kinds: &[KeyKind], key: &[u8]) -> Option<String> {
    if kinds.is_empty() {
        return None;
    }
    let mut parts = Vec::with_capacity(kinds.len());
    let mut rest = key;
    for kind in kinds {
        let (part, after) = kind.display(rest)?;
        parts.push(part);
        rest = after;
    }
    match (rest.is_empty(), parts.len()) {
        (false, _) => None,
        (true, 1) => parts.pop(),
        (true, _) => Some(format!("[{}]", parts.join(", "))),
    }
}

/// The run-time state of a collection opened without its record type, from its schema as
/// stored at commit `read_at`.
fn dyn_state(db: &Db, name: &str, stored: &StoredSchema, shared: tessera_value::SharedKeys, read_at: u64) -> Result<CollectionState> {
    let (records_name, index_name) = (format!("tessera.col.{name}"), format!("tessera.idx.{name}"));
    super::refuse_missing_keyspaces(db, name, &records_name, &index_name)?;
    let records = db.internal_keyspace(&records_name)?;
    let index_keyspace = db.internal_keyspace(&index_name)?;
    let single_key_type = match stored.key_fields.as_slice() {
        [field] => stored.shape.resolve(field).cloned(),
        _ => None,
    };
    // A read-only handle on a file of an older format reads its index entries as they were
    // written, in an order the planner no longer assumes: its queries scan.
    let current_entries = db.stored_format_version()? >= super::upgrade::RESIDUAL_NUMBERS_FORMAT;
    Ok(CollectionState {
        name: name.to_owned(),
        records,
        index_keyspace,
        shape: stored.shape.clone(),
        indexes: stored.indexes.iter().map(|index| IndexState::new(index, index.ready && current_entries)).collect(),
        keys: RecordKeys { shared: Arc::new(shared), ids: Default::default() },
        key_text: |_| None,
        key_kinds: std::sync::OnceLock::new(),
        single_key_type,
        checksums_verified: db.verifies_checksums(),
        superseded: std::sync::OnceLock::new(),
        peers: std::sync::Mutex::default(),
        schema_watch: super::schema_watch::SchemaWatch::new(
            db.internal_keyspace(super::SCHEMA_KEYSPACE)?,
            stored.key_fields.clone(),
            read_at,
        ),
        type_id: std::any::TypeId::of::<DynCollection>(),
    })
}

/// The key fields' encodings learned from the first stored records; `None` if they do not
/// tell (see [`key_kind::learn`]).
fn learn_key_kinds(db: &Db, state: &CollectionState, schema: &DynSchema) -> Result<Option<Vec<KeyKind>>> {
    let mut candidates = Vec::with_capacity(schema.key_fields.len());
    for path in &schema.key_fields {
        let desc = schema
            .shape
            .resolve(path)
            .ok_or_else(|| Error::Corrupted(format!("collection {:?}: key field `{path}` is not in the stored shape", state.name)))?;
        candidates.push(KeyKind::candidates(desc));
    }
    // A shape that records every key field's width (a record type stored it) tells alone.
    if candidates.iter().all(|kinds| kinds.len() == 1) {
        return Ok(Some(candidates.iter().map(|kinds| kinds[0]).collect()));
    }
    db.read(|tx| {
        let mut documents = Vec::new();
        for entry in tx.range(&state.records, ..)?.take(key_kind::LEARN_RECORDS_MAX) {
            // A damaged record teaches nothing, and is reported when it is read: opening the
            // collection does not fail on it.
            let Ok((key, bytes)) = entry else { continue };
            let Ok(doc) = state.open_record(key, bytes) else { continue };
            documents.push((key.to_vec(), plain(doc.root())?));
        }
        let mut samples = Vec::with_capacity(documents.len());
        for (key, bytes) in &documents {
            let root = Doc::from_trusted(bytes)?.root();
            let values: Option<Vec<Value<'_>>> = schema.key_fields.iter().map(|path| crate::query::lookup(root, path)).collect();
            match values {
                Some(values) => samples.push((key.clone(), values)),
                None => return Ok(None),
            }
        }
        Ok(key_kind::learn(&candidates, &samples))
    })
}

/// `value` as a standalone document without shared keys, encoded with the thread's reused
/// encoder buffers (a fresh `Encoder` per record allocated and cleared its tables each time).
fn plain(value: Value<'_>) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    tessera_value::codec::encode_into(&value, None, &tessera_value::codec::FieldIds::default(), &mut bytes)?;
    Ok(bytes)
}

/// JSON text as a document; the error names `what` it was.
fn json_document(collection: &str, what: &str, json: &[u8]) -> Result<Vec<u8>> {
    tessera_value::from_json(json).map_err(|error| Error::SchemaViolation {
        collection: collection.to_owned(),
        key: String::new(),
        path: what.to_owned(),
        problem: format!("not JSON: {error}"),
    })
}

impl DynCollection {
    /// The collection's name.
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(serde::Serialize, serde::Deserialize, Record)]
    /// # #[record(name = "tags")]
    /// # struct Tag { #[record(key)] name: String }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # db.collection::<Tag>()?;
    /// assert_eq!(db.dyn_collection("tags")?.name(), "tags");
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn name(&self) -> &str {
        &self.state.name
    }

    /// The stored schema (with the key kinds learned, if they were).
    ///
    /// ```
    /// # use tessera::collection::{Record, TypeDesc};
    /// # #[derive(serde::Serialize, serde::Deserialize, Record)]
    /// # #[record(name = "tags")]
    /// # struct Tag { #[record(key)] name: String }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # db.collection::<Tag>()?;
    /// let schema = db.dyn_collection("tags")?.schema().clone();
    /// assert_eq!(schema.shape, TypeDesc::Struct(vec![("name".into(), TypeDesc::String)]));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn schema(&self) -> &DynSchema {
        &self.schema
    }

    /// The keyspace that holds the collection's records (`tessera.col.NAME`): the keyspace a
    /// [`crate::store::Change`] of the durable feed names for this collection's records.
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(serde::Serialize, serde::Deserialize, Record)]
    /// # #[record(name = "tags")]
    /// # struct Tag { #[record(key)] name: String }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # db.collection::<Tag>()?;
    /// assert_eq!(db.dyn_collection("tags")?.records_keyspace(), "tessera.col.tags");
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn records_keyspace(&self) -> &str {
        self.state.records.name()
    }

    /// The record a change of the durable feed holds: `key` and `stored`, the value as the
    /// store keeps it in [`DynCollection::records_keyspace`] (encoded with the collection's
    /// shared keys). The bytes are validated, never trusted: damage or a shared key this
    /// handle does not know (a newer record type wrote it; open the collection again) is an
    /// error naming the collection and key.
    ///
    /// ```
    /// use tessera::{Db, DbOptions};
    /// # use tessera::collection::Record;
    /// # #[derive(serde::Serialize, serde::Deserialize, Record)]
    /// # #[record(name = "tags")]
    /// # struct Tag { #[record(key)] name: String, uses: u32 }
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open_with(dir.path().join("db"), DbOptions { durable_feed: true, ..DbOptions::default() })?;
    /// let typed = db.collection::<Tag>()?;
    /// db.write(|tx| typed.insert(tx, &Tag { name: "rust".into(), uses: 3 }))?;
    /// let tags = db.dyn_collection("tags")?;
    /// let batch = db.changes_since(0, 100)?.pop().unwrap();
    /// let change = batch.changes.iter().find(|change| &*change.keyspace == tags.records_keyspace()).unwrap();
    /// let record = tags.decode_stored(&change.key, change.new.as_deref().unwrap())?;
    /// assert_eq!(record.to_json(), r#"{"name":"rust","uses":3}"#);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn decode_stored(&self, key: &[u8], stored: &[u8]) -> Result<DynRecord> {
        super::open_stored(stored, &self.state.keys.shared, false).map_err(|error| self.state.decode_error(key, error))?;
        Ok(DynRecord::stored(&self.state, key, stored))
    }

    fn violation(&self, key: &str, misfit: Misfit) -> Error {
        Error::SchemaViolation { collection: self.state.name.clone(), key: key.to_owned(), path: misfit.path, problem: misfit.problem }
    }

    /// The key kinds, or the error a write or key read meets when they are unknown.
    fn key_kinds(&self) -> Result<&[KeyKind]> {
        if self.schema.key_kinds.len() == self.schema.key_fields.len() {
            return Ok(&self.schema.key_kinds);
        }
        Err(self.unknown_key_kinds())
    }

    fn unknown_key_kinds(&self) -> Error {
        Error::SchemaViolation {
            collection: self.state.name.clone(),
            key: String::new(),
            path: KEY_PATH.to_owned(),
            problem: "the key fields' integer or float widths are not recorded, and no stored record tells them".into(),
        }
    }

    /// Encodes a primary key given as a value: the key field's value, or for a composite key
    /// an array of them in key order. `None` when the key kinds are unknown.
    fn encode_key(&self, key: Value<'_>) -> Result<Option<Vec<u8>>> {
        let Ok(kinds) = self.key_kinds() else { return Ok(None) };
        let parts: Vec<Value<'_>> = match (kinds.len(), key.as_array()) {
            (1, _) => vec![key],
            (_, Some(array)) if array.len() == kinds.len() => array.iter().collect(),
            _ => {
                let problem = format!("a composite key is an array of {} values ({})", kinds.len(), self.schema.key_fields.join(", "));
                return Err(self.violation("", Misfit { path: KEY_PATH.into(), problem }));
            }
        };
        let mut out = Vec::with_capacity(32);
        for ((kind, part), field) in kinds.iter().zip(parts).zip(&self.schema.key_fields) {
            kind.encode(part, &mut out).map_err(|problem| self.violation("", Misfit { path: field.clone(), problem }))?;
        }
        Ok(Some(out))
    }

    /// The stored encoding of `key` (the key field's value; an array of the values for a
    /// composite key), for [`DynCollection::get_stored_with`] and
    /// [`DynCollection::delete_stored`]: [`Error::SchemaViolation`] naming the key field if a
    /// part is not of its type, and `None` when the key kinds are not known (see the module
    /// docs, "Keys": no record can be found by key then).
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(serde::Serialize, serde::Deserialize, Record)]
    /// # #[record(name = "events")]
    /// # struct Event { #[record(key)] day: u16, #[record(key)] name: String }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # db.collection::<Event>()?;
    /// let events = db.dyn_collection("events")?;
    /// let key = tessera::value::from_json(br#"[3, "launch"]"#).unwrap();
    /// let stored = events.stored_key(tessera::value::Doc::from_untrusted(&key)?.root())?;
    /// assert_eq!(stored, Some(tessera::store::key::encode(&(3u16, "launch"))));
    /// let wrong = tessera::value::from_json(br#"[3, 4]"#).unwrap();
    /// assert!(events.stored_key(tessera::value::Doc::from_untrusted(&wrong)?.root()).is_err());
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn stored_key(&self, key: Value<'_>) -> Result<Option<Vec<u8>>> {
        self.encode_key(key)
    }

    /// The record at `key` (the key field's value; an array of the values for a composite
    /// key).
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(serde::Serialize, serde::Deserialize, Record)]
    /// # #[record(name = "events")]
    /// # struct Event { #[record(key)] day: u16, #[record(key)] name: String }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let events = db.collection::<Event>()?;
    /// # db.write(|tx| events.insert(tx, &Event { day: 3, name: "launch".into() }))?;
    /// let events = db.dyn_collection("events")?;
    /// let key = tessera::value::from_json(br#"[3, "launch"]"#).unwrap();
    /// let found = events.get(&db, tessera::value::Doc::from_untrusted(&key)?.root())?;
    /// assert!(found.is_some());
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn get(&self, source: &impl ReadSource, key: Value<'_>) -> Result<Option<DynRecord>> {
        let Some(key) = self.encode_key(key)? else { return Ok(None) };
        source.with_snapshot(|snapshot| self.get_encoded(snapshot, &key))
    }

    /// [`DynCollection::get`] with the key as JSON text (`42`, `"ada"`, `[3, "launch"]`).
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(serde::Serialize, serde::Deserialize, Record)]
    /// # #[record(name = "tags")]
    /// # struct Tag { #[record(key)] name: String }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # db.collection::<Tag>()?;
    /// assert!(db.dyn_collection("tags")?.get_json(&db, r#""none""#)?.is_none());
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn get_json(&self, source: &impl ReadSource, key: &str) -> Result<Option<DynRecord>> {
        let bytes = json_document(&self.state.name, KEY_PATH, key.as_bytes())?;
        self.get(source, Doc::from_untrusted(&bytes)?.root())
    }

    fn get_encoded(&self, snapshot: &dyn Snapshot, key: &[u8]) -> Result<Option<DynRecord>> {
        self.state.readable_in(snapshot)?;
        match snapshot.get_value(&self.state.records, key)? {
            Some(bytes) => DynRecord::read(&self.state, key, bytes).map(Some),
            None => Ok(None),
        }
    }

    /// Checks `record` against the schema and encodes it with the shared keys; returns its
    /// key and its bytes (the key's text is formatted only for an error).
    fn prepare(&self, record: Value<'_>, source: Source) -> Result<(Vec<u8>, Vec<u8>)> {
        let bytes = match conform_into::conform_into(record, &self.state.shape, &self.state.keys.shared, source) {
            Ok(bytes) => bytes,
            Err(ConformError::Misfit(misfit)) => return Err(self.violation(&self.key_text(record), misfit)),
            Err(ConformError::Encode(error)) => return Err(error.into()),
        };
        let key = self.key_of(record, &bytes)?;
        Ok((key, bytes))
    }

    /// [`DynCollection::prepare`] for a record given as a whole document: opened with the
    /// shared keys (validated, unless the caller opened it trusted with this collection's
    /// table), and when it is already what conforming would write (`conformed.rs`), its bytes
    /// are taken as they are.
    /// The bytes are borrowed from `document` when they are stored as they are (no copy).
    fn prepare_document<'a>(&self, document: Doc<'a>) -> Result<(Vec<u8>, std::borrow::Cow<'a, [u8]>)> {
        let shared: &tessera_value::SharedKeys = &self.state.keys.shared;
        let bytes: &'a [u8] = document.bytes();
        let document = match document.shared_keys() {
            Some(keys) if std::ptr::eq(keys, shared) || keys.identity() == shared.identity() => document,
            // Written with another table (another collection's): its ids name other fields
            // here, so the record is read by its own table's names and written with ours.
            Some(_) => return self.prepare(document.root(), Source::Binary).map(|(key, bytes)| (key, bytes.into())),
            None => Doc::from_untrusted_with_keys(document.bytes(), shared)?,
        };
        let record = document.root();
        if conformed::is_conformed(record, &self.state.shape) {
            let key = self.key_of(record, bytes)?;
            return Ok((key, bytes.into()));
        }
        self.prepare(record, Source::Binary).map(|(key, bytes)| (key, bytes.into()))
    }

    /// The key of `bytes` (`record` conformed), read from them.
    fn key_of(&self, record: Value<'_>, bytes: &[u8]) -> Result<Vec<u8>> {
        let key_text = || self.key_text(record);
        let kinds = self.key_kinds()?;
        let mut key = Vec::with_capacity(32);
        let doc = Doc::from_trusted_with_keys(bytes, &self.state.keys.shared)?;
        for ((path, key_path), kind) in self.schema.key_fields.iter().zip(self.key_paths.iter()).zip(kinds) {
            let part = key_path.lookup(doc.root()).filter(|value| !value.is_null());
            let part = part.ok_or_else(|| {
                self.violation(&key_text(), Misfit { path: path.clone(), problem: "missing: a key field is required".into() })
            })?;
            kind.encode(part, &mut key).map_err(|problem| self.violation(&key_text(), Misfit { path: path.clone(), problem }))?;
        }
        Ok(key)
    }

    /// A stored key as JSON text (the key field's value, or an array for a composite key),
    /// when the key kinds are known and the bytes are such a key.
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(serde::Serialize, serde::Deserialize, Record)]
    /// # #[record(name = "events")]
    /// # struct Event { #[record(key)] day: u16, #[record(key)] name: String }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let events = db.collection::<Event>()?;
    /// # db.write(|tx| events.insert(tx, &Event { day: 3, name: "launch".into() }))?;
    /// let events = db.dyn_collection("events")?;
    /// let key = tessera::store::key::encode(&(3u16, "launch"));
    /// assert_eq!(events.display_key(&key).as_deref(), Some(r#"[3, "launch"]"#));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn display_key(&self, key: &[u8]) -> Option<String> {
        display_key(self.key_kinds().ok()?, key)
    }

    /// The key fields of `record` as text for errors: the value's JSON, or a JSON array for a
    /// composite key; empty if a field is missing.
    fn key_text(&self, record: Value<'_>) -> String {
        let parts: Option<Vec<String>> =
            self.schema.key_fields.iter().map(|path| crate::query::lookup(record, path).map(|value| value.to_json())).collect();
        match parts {
            Some(parts) if parts.len() == 1 => parts.into_iter().next().unwrap_or_default(),
            Some(parts) => format!("[{}]", parts.join(", ")),
            None => String::new(),
        }
    }

    /// Inserts `record`; [`Error::DuplicateKey`] if its key exists, and
    /// [`Error::SchemaViolation`] if it does not fit the schema (nothing is written).
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(serde::Serialize, serde::Deserialize, Record)]
    /// # #[record(name = "tags")]
    /// # struct Tag { #[record(key)] name: String }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # db.collection::<Tag>()?;
    /// let tags = db.dyn_collection("tags")?;
    /// let rust = tessera::value::from_json(br#"{"name": "rust"}"#).unwrap();
    /// let rust = tessera::value::Doc::from_untrusted(&rust)?.root();
    /// db.write(|tx| tags.insert(tx, rust))?;
    /// assert!(matches!(db.write(|tx| tags.insert(tx, rust)), Err(tessera::Error::DuplicateKey { .. })));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn insert(&self, tx: &mut WriteTxn<'_>, record: Value<'_>) -> Result<WriteOutcome> {
        self.insert_from(tx, record, Source::Binary)
    }

    fn insert_from(&self, tx: &mut WriteTxn<'_>, record: Value<'_>, source: Source) -> Result<WriteOutcome> {
        let (key, bytes) = self.prepare(record, source)?;
        if tx.get(&self.state.records, &key)?.is_some() {
            return Err(Error::DuplicateKey { collection: self.state.name.clone(), key: self.key_text(record) });
        }
        self.state.store(tx, &key, None, &bytes)
    }

    /// Inserts or replaces `record`: Inserted, Updated, or Unchanged when the stored bytes are
    /// identical.
    ///
    /// ```
    /// # use tessera::collection::{Record, WriteOutcome};
    /// # #[derive(serde::Serialize, serde::Deserialize, Record)]
    /// # #[record(name = "tags")]
    /// # struct Tag { #[record(key)] name: String, uses: u32 }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # db.collection::<Tag>()?;
    /// let tags = db.dyn_collection("tags")?;
    /// let json = br#"{"name": "rust", "uses": 1}"#;
    /// assert_eq!(db.write(|tx| tags.upsert_json(tx, json))?, WriteOutcome::Inserted);
    /// assert_eq!(db.write(|tx| tags.upsert_json(tx, json))?, WriteOutcome::Unchanged);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn upsert(&self, tx: &mut WriteTxn<'_>, record: Value<'_>) -> Result<WriteOutcome> {
        self.upsert_from(tx, record, Source::Binary)
    }

    /// [`DynCollection::upsert`] of a record read from JSON text (with
    /// [`tessera_value::from_json`] or [`tessera_value::from_json_with`]): JSON has no binary
    /// type, so where the schema has bytes, a base64 string (standard alphabet, padded; how
    /// [`DynRecord::to_json`] writes bytes) is read as those bytes, as
    /// [`DynCollection::upsert_json`] does. Any other string there is
    /// [`Error::SchemaViolation`].
    ///
    /// ```
    /// use tessera::collection::{DynSchema, KeyKind, TypeDesc, WriteOutcome};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// let shape = TypeDesc::Struct(vec![("id".into(), TypeDesc::Int), ("data".into(), TypeDesc::Bytes)]);
    /// let schema = DynSchema { version: 1, key_fields: vec!["id".into()], key_kinds: vec![KeyKind::U32], shape, indexes: vec![] };
    /// let blobs = db.create_dyn_collection("blobs", &schema)?;
    /// let json = tessera::value::from_json(br#"{"id": 1, "data": "AAH/"}"#)?;
    /// let record = tessera::value::Doc::from_untrusted(&json)?.root();
    /// assert_eq!(db.write(|tx| blobs.upsert_json_document(tx, record))?, WriteOutcome::Inserted);
    /// let stored = blobs.get_json(&db, "1")?.unwrap();
    /// assert_eq!(stored.value().get("data").unwrap().as_bytes(), Some(&[0u8, 1, 255][..]));
    /// assert_eq!(stored.to_json(), r#"{"id":1,"data":"AAH/"}"#);
    /// // Read from a binary document, the same string is a string, which a bytes field refuses.
    /// assert!(db.write(|tx| blobs.upsert(tx, record)).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn upsert_json_document(&self, tx: &mut WriteTxn<'_>, record: Value<'_>) -> Result<WriteOutcome> {
        self.upsert_from(tx, record, Source::Json)
    }

    fn upsert_from(&self, tx: &mut WriteTxn<'_>, record: Value<'_>, source: Source) -> Result<WriteOutcome> {
        let (key, bytes) = self.prepare(record, source)?;
        let old = tx.get(&self.state.records, &key)?.map(<[u8]>::to_vec);
        self.state.store(tx, &key, old.as_deref(), &bytes)
    }

    /// The shared-key table this collection's records are encoded with: a binding that
    /// encodes records itself encodes them with it for [`DynCollection::insert_document`] and
    /// [`DynCollection::upsert_document`].
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(serde::Serialize, serde::Deserialize, Record)]
    /// # #[record(name = "tags")]
    /// # struct Tag { #[record(key)] name: String }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # db.collection::<Tag>()?;
    /// let tags = db.dyn_collection("tags")?;
    /// assert!(tags.shared_keys().id("name").is_some());
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn shared_keys(&self) -> &tessera_value::SharedKeys {
        &self.state.keys.shared
    }

    /// [`DynCollection::insert`] of a record given as a whole binary document, best encoded
    /// with [`DynCollection::shared_keys`]. The document is validated (damage is an error and
    /// nothing is written) unless it was opened with [`Doc::from_trusted_with_keys`] and this
    /// collection's shared keys, which vouches for it; when it is already what the check
    /// against the schema would write
    /// (every struct lists exactly its fields in declared order, null for an unset optional
    /// one, a float in every float field, ...) its bytes are stored as they are, without being
    /// encoded again; otherwise it is checked and conformed as `insert` does, with the same
    /// errors.
    ///
    /// ```
    /// # use tessera::collection::{Record, WriteOutcome};
    /// # #[derive(serde::Serialize, serde::Deserialize, Record)]
    /// # #[record(name = "tags")]
    /// # struct Tag { #[record(key)] name: String, uses: u32 }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let typed = db.collection::<Tag>()?;
    /// use tessera::value::Doc;
    /// let tags = db.dyn_collection("tags")?;
    /// let mut out = tessera::value::Encoder::with_shared_keys(tags.shared_keys());
    /// out.begin_dict()?;
    /// out.key("name")?;
    /// out.push_str("rust")?;
    /// out.key("uses")?;
    /// out.push_i64(3)?;
    /// out.end_dict()?;
    /// let bytes = out.finish()?;
    /// let document = Doc::from_trusted_with_keys(&bytes, tags.shared_keys())?; // the encoder's output
    /// assert_eq!(db.write(|tx| tags.insert_document(tx, document))?, WriteOutcome::Inserted);
    /// assert_eq!(typed.get(&db, "rust")?.unwrap().uses, 3);
    /// if let Ok(damaged) = Doc::from_trusted(&bytes[1..]) {
    ///     // Not opened with the collection's keys: validated, and refused.
    ///     assert!(db.write(|tx| tags.insert_document(tx, damaged)).is_err());
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn insert_document(&self, tx: &mut WriteTxn<'_>, document: Doc<'_>) -> Result<WriteOutcome> {
        let (key, bytes) = self.prepare_document(document)?;
        if tx.get(&self.state.records, &key)?.is_some() {
            let record = Doc::from_trusted_with_keys(&bytes, &self.state.keys.shared)?.root();
            return Err(Error::DuplicateKey { collection: self.state.name.clone(), key: self.key_text(record) });
        }
        self.state.store(tx, &key, None, &bytes)
    }

    /// [`DynCollection::upsert`] of a record given as a whole binary document: see
    /// [`DynCollection::insert_document`].
    ///
    /// ```
    /// # use tessera::collection::{Record, WriteOutcome};
    /// # #[derive(serde::Serialize, serde::Deserialize, Record)]
    /// # #[record(name = "tags")]
    /// # struct Tag { #[record(key)] name: String, uses: u32 }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # db.collection::<Tag>()?;
    /// use tessera::value::Doc;
    /// let tags = db.dyn_collection("tags")?;
    /// let bytes = tessera::value::from_json(br#"{"name": "go", "uses": 1}"#)?; // no shared keys: conformed
    /// let document = Doc::from_untrusted(&bytes)?;
    /// assert_eq!(db.write(|tx| tags.upsert_document(tx, document))?, WriteOutcome::Inserted);
    /// assert_eq!(db.write(|tx| tags.upsert_document(tx, document))?, WriteOutcome::Unchanged);
    /// let wrong = tessera::value::from_json(br#"{"name": "go", "uses": "many"}"#)?;
    /// let wrong = Doc::from_untrusted(&wrong)?;
    /// assert!(matches!(db.write(|tx| tags.upsert_document(tx, wrong)), Err(tessera::Error::SchemaViolation { .. })));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn upsert_document(&self, tx: &mut WriteTxn<'_>, document: Doc<'_>) -> Result<WriteOutcome> {
        let (key, bytes) = self.prepare_document(document)?;
        let old = tx.get(&self.state.records, &key)?.map(<[u8]>::to_vec);
        self.state.store(tx, &key, old.as_deref(), &bytes)
    }

    /// [`DynCollection::insert`] from JSON text.
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(serde::Serialize, serde::Deserialize, Record)]
    /// # #[record(name = "tags")]
    /// # struct Tag { #[record(key)] name: String }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # db.collection::<Tag>()?;
    /// let tags = db.dyn_collection("tags")?;
    /// assert!(db.write(|tx| tags.insert_json(tx, br#"{"name": 1}"#)).is_err());
    /// assert!(db.write(|tx| tags.insert_json(tx, br#"{"name": "#)).is_err());
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn insert_json(&self, tx: &mut WriteTxn<'_>, json: &[u8]) -> Result<WriteOutcome> {
        let bytes = json_document(&self.state.name, "$", json)?;
        self.insert_from(tx, Doc::from_untrusted(&bytes)?.root(), Source::Json)
    }

    /// [`DynCollection::upsert`] from JSON text.
    ///
    /// ```
    /// # use tessera::collection::{Record, WriteOutcome};
    /// # #[derive(serde::Serialize, serde::Deserialize, Record)]
    /// # #[record(name = "tags")]
    /// # struct Tag { #[record(key)] name: String }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # db.collection::<Tag>()?;
    /// let tags = db.dyn_collection("tags")?;
    /// assert_eq!(db.write(|tx| tags.upsert_json(tx, br#"{"name": "go"}"#))?, WriteOutcome::Inserted);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn upsert_json(&self, tx: &mut WriteTxn<'_>, json: &[u8]) -> Result<WriteOutcome> {
        let bytes = json_document(&self.state.name, "$", json)?;
        self.upsert_from(tx, Doc::from_untrusted(&bytes)?.root(), Source::Json)
    }

    /// Deletes the record at `key` (as for [`DynCollection::get`]): Deleted, or Unchanged if
    /// there was none.
    ///
    /// ```
    /// # use tessera::collection::{Record, WriteOutcome};
    /// # #[derive(serde::Serialize, serde::Deserialize, Record)]
    /// # #[record(name = "tags")]
    /// # struct Tag { #[record(key)] name: String }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # db.collection::<Tag>()?;
    /// let tags = db.dyn_collection("tags")?;
    /// db.write(|tx| tags.insert_json(tx, br#"{"name": "go"}"#))?;
    /// let key = tessera::value::from_json(br#""go""#).unwrap();
    /// let key = tessera::value::Doc::from_untrusted(&key)?.root();
    /// assert_eq!(db.write(|tx| tags.delete(tx, key))?, WriteOutcome::Deleted);
    /// assert_eq!(db.write(|tx| tags.delete(tx, key))?, WriteOutcome::Unchanged);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn delete(&self, tx: &mut WriteTxn<'_>, key: Value<'_>) -> Result<WriteOutcome> {
        let key = self.encode_key(key)?.ok_or_else(|| self.unknown_key_kinds())?;
        self.state.delete(tx, &key)
    }

    /// [`DynCollection::delete`] by the stored key's encoding (as
    /// [`DynCollection::stored_key`] gives it), for a caller that encoded the key once:
    /// Deleted, or Unchanged if no record is stored under `key` (bytes that are no stored key
    /// included).
    ///
    /// ```
    /// # use tessera::collection::{Record, WriteOutcome};
    /// # #[derive(serde::Serialize, serde::Deserialize, Record)]
    /// # #[record(name = "tags")]
    /// # struct Tag { #[record(key)] name: String }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # db.collection::<Tag>()?;
    /// let tags = db.dyn_collection("tags")?;
    /// db.write(|tx| tags.insert_json(tx, br#"{"name": "go"}"#))?;
    /// let key = tessera::store::key::encode("go");
    /// assert_eq!(db.write(|tx| tags.delete_stored(tx, &key))?, WriteOutcome::Deleted);
    /// assert_eq!(db.write(|tx| tags.delete_stored(tx, &key))?, WriteOutcome::Unchanged);
    /// assert_eq!(db.write(|tx| tags.delete_stored(tx, b""))?, WriteOutcome::Unchanged);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn delete_stored(&self, tx: &mut WriteTxn<'_>, key: &[u8]) -> Result<WriteOutcome> {
        if !stored_key_size(key) {
            return Ok(WriteOutcome::Unchanged);
        }
        self.state.delete(tx, key)
    }
}

#[cfg(test)]
mod tests {
    use super::DynRecord;
    use crate::collection::Record;
    use std::collections::BTreeMap;

    #[derive(serde::Serialize, serde::Deserialize, Record, Debug, Clone, PartialEq)]
    #[record(name = "notes")]
    struct Note {
        #[record(key)]
        id: u32,
        first: BTreeMap<String, i64>,
        second: BTreeMap<String, i64>,
    }

    /// A record kept as stored equals its standalone copy, whose dict order may differ, and
    /// differs from the same key with other content.
    #[test]
    fn stored_and_standalone_records_compare_by_content() {
        let dir = tempfile::tempdir().unwrap();
        let db = crate::Db::open(dir.path().join("db")).unwrap();
        let notes = db.collection::<Note>().unwrap();
        let map = |entries: &[(&str, i64)]| entries.iter().map(|(k, v)| (k.to_string(), *v)).collect::<BTreeMap<_, _>>();
        // "q" is met first in `first`, so the standalone copy gives it the smaller local id.
        let note = Note { id: 1, first: map(&[("q", 1)]), second: map(&[("z", 5), ("q", 6)]) };
        db.write(|tx| notes.insert(tx, &note)).unwrap();
        let dynamic = db.dyn_collection("notes").unwrap();
        let stored = dynamic.get_json(&db, "1").unwrap().unwrap();
        let standalone = DynRecord::standalone(stored.key_bytes().to_vec(), stored.bytes().to_vec());
        assert!(matches!(standalone.body, super::Body::Standalone(_)));
        assert!(matches!(stored.body, super::Body::Stored { .. }));
        assert_eq!(stored, standalone);
        assert_eq!(standalone, stored);
        assert_eq!(stored.value(), standalone.value());
        db.write(|tx| notes.upsert(tx, &Note { second: map(&[("z", 5), ("q", 7)]), ..note.clone() })).unwrap();
        let changed = dynamic.get_json(&db, "1").unwrap().unwrap();
        assert_ne!(changed, stored, "same key, other content");
        assert_ne!(changed, standalone);
    }
}
