//! Typed collections: records with a primary key, secondary and unique indexes, queries with
//! three-valued logic, stored in tessera's binary format.
//!
//! ```
//! use serde::{Deserialize, Serialize};
//! use tessera::collection::{Record, WriteOutcome};
//!
//! #[derive(Serialize, Deserialize, Record, Debug, PartialEq)]
//! #[record(name = "people", version = 1)]
//! struct Person {
//!     #[record(key)]
//!     name: String,
//!     #[record(index)]
//!     age: u32,
//!     email: Option<String>,
//! }
//!
//! # let dir = tempfile::tempdir().unwrap();
//! let db = tessera::Db::open(dir.path().join("db"))?;
//! let people = db.collection::<Person>()?;
//! let ada = Person { name: "Ada".into(), age: 36, email: None };
//! assert_eq!(db.write(|tx| people.upsert(tx, &ada))?, WriteOutcome::Inserted);
//! assert_eq!(db.write(|tx| people.upsert(tx, &ada))?, WriteOutcome::Unchanged);
//!
//! let adults = people.filter(Person::age().ge(18)).fetch(&db)?;
//! assert_eq!(adults, vec![ada]);
//! assert_eq!(people.filter_text("age >= 18 and email is null")?.count(&db)?, 1);
//! # Ok::<(), tessera::Error>(())
//! ```
//!
//! **Storage.** A collection's records live in keyspace `tessera.col.NAME`, keyed by the
//! primary key's order-preserving encoding (`store::key`), each record one binary document.
//! Its indexes share keyspace `tessera.idx.NAME`: an entry's key is the index's id byte, the
//! field's sort key (see `sort_key`) and, except for a unique index's non-null values, the
//! primary key; its value is the primary key. An entry that would be longer than a key (511
//! bytes) holds a long string's truncated sort key instead (the first 256 escaped bytes, a
//! marker and a hash of the whole string), always followed by the primary key; a walk in index
//! order sorts each run of entries that share those bytes by the records' values (see
//! `sort_key` and `docs/collections.md`, "Index entries"). The schema (shape, key fields,
//! indexes, version) is a record in `tessera.schema`.
//!
//! **Schema changes.** On [`crate::Db::collection`], the stored schema is compared with the
//! record type: new optional fields and new enum variants are compatible; a new index is
//! built in the background (queries scan until it is ready); an index the type no longer
//! declares is dropped. A changed primary key, a changed field type or a new required field
//! is [`Error::SchemaMismatch`], unless a migration is registered with
//! [`crate::Db::collection_with`]: it then runs once, over every record, in one transaction.

mod build;
mod decode_pipeline;
mod dynamic;
mod engine;
pub(crate) mod key_layout;
pub(crate) mod keys;
mod plan;
mod query;
mod schema;
mod schema_watch;
pub(crate) mod sort_key;
mod upgrade;
mod view;

pub use build::ELEMENT_ENTRIES_MAX;
pub use dynamic::{
    Catalog, DynCollection, DynIndex, DynQuery, DynRecord, DynSchema, KeyKind, SALVAGE_FORMAT_VERSION_MIN, SALVAGE_SKIPPED_MAX,
    SalvageReport, SalvageSink, SkipReason, SkippedEntry, salvage,
};
pub use plan::{Access, Plan, PlanOrdering};
pub(crate) use query::QueryParts;
pub use query::{Nulls, Order, OrderField, Query, Records};
pub use schema::{Describe, IndexDef, IntType, TypeDesc, describe_once};
pub use tessera_derive::{Embed, Record};
pub(crate) use upgrade::upgrade_keyspace;
pub use view::{PlainView, RecordRef, RecordView, ViewParts};

use crate::Db;
use crate::error::{Error, Result};
use crate::query::{Expr, Literal};
use crate::store::key::KeyPart;
use crate::store::{Keyspace, ReadSource, Snapshot, WriteTxn};
use keys::RecordKeys;
pub(crate) use schema::strip_option;
use schema::{StoredIndex, StoredSchema};
use serde::Serialize;
use std::borrow::Borrow;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tessera_value::codec::{DecodeOwned, Encode};
use tessera_value::{Doc, Value};

/// Keyspace holding every collection's stored schema.
pub(crate) const SCHEMA_KEYSPACE: &str = "tessera.schema";
/// Longest collection name.
///
/// ```
/// use tessera::collection::{Record, COLLECTION_NAME_LEN_MAX};
/// #[derive(Record)]
/// #[record(name = "tasks")]
/// struct Task { #[record(key)] id: u32 }
/// assert!(Task::NAME.len() <= COLLECTION_NAME_LEN_MAX);
/// ```
pub const COLLECTION_NAME_LEN_MAX: usize = 200;

/// A record type: what `#[derive(Record)]` generates. Records are written and read by the
/// generated codec ([`Encode`], [`tessera_value::codec::Decode`]), with their field names as
/// the collection's shared keys; serde is not needed.
///
/// ```
/// use tessera::collection::Record;
/// #[derive(Record, Debug, PartialEq)]
/// #[record(name = "people")]
/// struct Person {
///     #[record(key)]
///     id: u64,
///     #[record(unique)]
///     email: String,
///     #[record(index)]
///     age: u8,
/// }
/// assert_eq!((Person::NAME, Person::KEY_FIELDS), ("people", &["id"][..]));
/// assert_eq!(Person::INDEXES.len(), 2);
/// let ada = Person { id: 1, email: "ada@example.com".into(), age: 36 };
/// assert_eq!(ada.key(), 1);
/// ```
pub trait Record: Encode + DecodeOwned + Describe + Send + Sync + 'static {
    /// The primary key's type: one field's type, or a tuple for a composite key.
    type Key: KeyPart;
    /// The generated view of a stored record (`NameView<'t>`, one accessor per field): see
    /// [`RecordRef`].
    type View<'t>: RecordView<'t>;
    /// The collection's name in the database.
    const NAME: &'static str;
    /// The schema version; a change runs the registered migration.
    const VERSION: u32;
    /// Paths of the primary key's fields, in key order.
    const KEY_FIELDS: &'static [&'static str];
    /// Secondary and unique indexes.
    const INDEXES: &'static [IndexDef];
    /// This record's primary key.
    ///
    /// ```
    /// use tessera::collection::Record;
    /// #[derive(Record)]
    /// struct Event { #[record(key)] day: u16, #[record(key)] name: String, note: String }
    /// let event = Event { day: 3, name: "launch".into(), note: String::new() };
    /// assert_eq!(event.key(), (3, "launch".to_owned()));
    /// ```
    fn key(&self) -> Self::Key;
    /// Appends the primary key's order-preserving encoding.
    ///
    /// ```
    /// use tessera::collection::Record;
    /// #[derive(Record)]
    /// struct Event { #[record(key)] day: u16, #[record(key)] name: String }
    /// let mut key = Vec::new();
    /// Event { day: 3, name: "launch".into() }.encode_key(&mut key);
    /// assert_eq!(key, tessera::store::key::encode(&(3u16, "launch")));
    /// ```
    fn encode_key(&self, out: &mut Vec<u8>);
    /// Whether `key` is exactly this record's primary key encoded (compared in place, with
    /// nothing encoded for the parts tessera implements).
    ///
    /// ```
    /// use tessera::collection::Record;
    /// #[derive(Record)]
    /// struct Event { #[record(key)] day: u16, #[record(key)] name: String }
    /// let event = Event { day: 3, name: "launch".into() };
    /// assert!(event.has_key(&tessera::store::key::encode(&(3u16, "launch"))));
    /// assert!(!event.has_key(&tessera::store::key::encode(&(3u16, "land"))));
    /// ```
    fn has_key(&self, key: &[u8]) -> bool {
        let mut encoded = Vec::new();
        self.encode_key(&mut encoded);
        encoded == key
    }
    /// Encodes a primary key given as query constants, one per key field; `false` when a
    /// constant does not convert exactly to the field's type.
    ///
    /// ```
    /// use tessera::collection::Record;
    /// use tessera::query::Literal;
    /// #[derive(Record)]
    /// struct Event { #[record(key)] day: u16, #[record(key)] name: String }
    /// let mut key = Vec::new();
    /// assert!(Event::encode_key_literals(&[Literal::Int(3), Literal::Str("launch".into())], &mut key));
    /// assert_eq!(key, tessera::store::key::encode(&(3u16, "launch")));
    /// assert!(!Event::encode_key_literals(&[Literal::Int(70_000), Literal::Str("x".into())], &mut Vec::new()), "not a u16");
    /// ```
    fn encode_key_literals(literals: &[Literal], out: &mut Vec<u8>) -> bool;
    /// Encodes the leading key fields given as query constants (at most one per key field, in
    /// key order): a prefix of every key whose leading fields equal them. `false` when a
    /// constant does not convert exactly, or there are more constants than key fields.
    ///
    /// ```
    /// use tessera::collection::Record;
    /// use tessera::query::Literal;
    /// #[derive(Record)]
    /// struct Event { #[record(key)] day: u16, #[record(key)] name: String }
    /// let mut prefix = Vec::new();
    /// assert!(Event::encode_key_prefix(&[Literal::Int(3)], &mut prefix));
    /// assert!(tessera::store::key::encode(&(3u16, "launch")).starts_with(&prefix));
    /// ```
    fn encode_key_prefix(literals: &[Literal], out: &mut Vec<u8>) -> bool;
    /// The stored primary key `key` as text for errors and `explain`: `42`, `k1`, or
    /// `(2, "k1")` for a composite key. `None` if the bytes are not a key of this type.
    ///
    /// ```
    /// use tessera::collection::Record;
    /// #[derive(serde::Serialize, serde::Deserialize, Record)]
    /// #[record(name = "events")]
    /// struct Event {
    ///     #[record(key)]
    ///     day: u16,
    ///     #[record(key)]
    ///     name: String,
    /// }
    /// let key = tessera::store::key::encode(&(3u16, "launch"));
    /// assert_eq!(Event::display_key(&key).as_deref(), Some(r#"(3, "launch")"#));
    /// assert_eq!(Event::display_key(b"x"), None);
    /// ```
    fn display_key(key: &[u8]) -> Option<String> {
        let _ = key;
        None
    }
}

/// Primary-key field types a query constant converts to (for key lookups from a query).
///
/// ```
/// use tessera::collection::KeyLiteral;
/// use tessera::query::Literal;
/// assert_eq!(u8::from_literal(&Literal::Int(7)), Some(7));
/// assert_eq!(u8::from_literal(&Literal::Int(300)), None, "does not fit");
/// assert_eq!(String::from_literal(&Literal::Str("k".into())), Some("k".to_owned()));
/// ```
pub trait KeyLiteral: KeyPart + Sized {
    /// The constant as this type, if it converts exactly.
    ///
    /// ```
    /// use tessera::collection::KeyLiteral;
    /// use tessera::query::Literal;
    /// assert_eq!(i64::from_literal(&Literal::Int(-3)), Some(-3));
    /// assert_eq!(u64::from_literal(&Literal::Int(-3)), None);
    /// assert_eq!(String::from_literal(&Literal::Int(3)), None);
    /// ```
    fn from_literal(literal: &Literal) -> Option<Self>;

    /// Appends the constant's key encoding to `out`, as [`KeyPart::encode_key`] of
    /// [`KeyLiteral::from_literal`] would; false (and `out` untouched) if it does not convert.
    /// Types whose conversion allocates (`String`) encode from the literal in place.
    ///
    /// ```
    /// use tessera::collection::KeyLiteral;
    /// use tessera::query::Literal;
    /// let mut key = Vec::new();
    /// assert!(String::encode_literal(&Literal::Str("k".into()), &mut key));
    /// assert_eq!(key, tessera::store::key::encode("k"));
    /// assert!(!u8::encode_literal(&Literal::Int(300), &mut key), "does not fit");
    /// ```
    fn encode_literal(literal: &Literal, out: &mut Vec<u8>) -> bool {
        match Self::from_literal(literal) {
            Some(part) => {
                part.encode_key(out);
                true
            }
            None => false,
        }
    }

    /// Reads one encoded part of this type from the start of `encoded`, as text (strings
    /// quoted when `quote`); returns it and the rest. `None` if the bytes are not one.
    ///
    /// ```
    /// use tessera::collection::KeyLiteral;
    /// let key = tessera::store::key::encode(&(-7i32, "a"));
    /// let (number, rest) = <i32 as KeyLiteral>::display_part(&key, true).unwrap();
    /// assert_eq!(number, "-7");
    /// assert_eq!(<String as KeyLiteral>::display_part(rest, true).unwrap().0, "\"a\"");
    /// ```
    fn display_part(encoded: &[u8], quote: bool) -> Option<(String, &[u8])> {
        let _ = (encoded, quote);
        None
    }
}

/// Splits a fixed-width key part off the front of `encoded`.
fn fixed_part<const N: usize>(encoded: &[u8]) -> Option<([u8; N], &[u8])> {
    let (part, rest) = encoded.split_at_checked(N)?;
    Some((part.try_into().ok()?, rest))
}

macro_rules! int_key_literal {
    ($($type:ty),*) => {$(
        impl KeyLiteral for $type {
            fn display_part(encoded: &[u8], _quote: bool) -> Option<(String, &[u8])> {
                let (bytes, rest) = fixed_part::<{ std::mem::size_of::<$type>() }>(encoded)?;
                // Signed parts were written with the sign bit flipped (see `store::key`).
                let flip = if <$type>::MIN == 0 { 0 } else { 1 << (<$type>::BITS - 1) };
                let value = <$type>::from_be_bytes(bytes) ^ flip;
                Some((value.to_string(), rest))
            }

            fn from_literal(literal: &Literal) -> Option<Self> {
                match literal {
                    Literal::Int(int) => <$type>::try_from(*int).ok(),
                    Literal::UInt(uint) => <$type>::try_from(*uint).ok(),
                    Literal::Float(float) if float.fract() == 0.0 && float.abs() < 9.0e15 => <$type>::try_from(*float as i64).ok(),
                    _ => None,
                }
            }
        }
    )*};
}
int_key_literal!(i8, i16, i32, i64, u8, u16, u32, u64);

/// Stored as their 64-bit counterparts on every platform (see `store::key`), and read back
/// through them.
macro_rules! pointer_width_key_literal {
    ($($type:ty => $stored:ty),*) => {$(
        impl KeyLiteral for $type {
            fn display_part(encoded: &[u8], quote: bool) -> Option<(String, &[u8])> {
                <$stored>::display_part(encoded, quote)
            }

            fn from_literal(literal: &Literal) -> Option<Self> {
                <$stored>::from_literal(literal).and_then(|value| <$type>::try_from(value).ok())
            }
        }
    )*};
}
pointer_width_key_literal!(usize => u64, isize => i64);

impl KeyLiteral for String {
    fn display_part(encoded: &[u8], quote: bool) -> Option<(String, &[u8])> {
        let (bytes, rest) = crate::store::key::decode_bytes(encoded)?;
        let text = String::from_utf8_lossy(&bytes);
        Some((if quote { format!("{text:?}") } else { text.into_owned() }, rest))
    }

    fn from_literal(literal: &Literal) -> Option<Self> {
        match literal {
            Literal::Str(text) => Some(text.clone()),
            _ => None,
        }
    }

    fn encode_literal(literal: &Literal, out: &mut Vec<u8>) -> bool {
        match literal {
            Literal::Str(text) => {
                text.as_str().encode_key(out);
                true
            }
            _ => false,
        }
    }
}

/// Stored as a `String` key is.
impl KeyLiteral for Box<str> {
    fn display_part(encoded: &[u8], quote: bool) -> Option<(String, &[u8])> {
        String::display_part(encoded, quote)
    }

    fn from_literal(literal: &Literal) -> Option<Self> {
        String::from_literal(literal).map(String::into_boxed_str)
    }

    fn encode_literal(literal: &Literal, out: &mut Vec<u8>) -> bool {
        String::encode_literal(literal, out)
    }
}

impl KeyLiteral for bool {
    fn display_part(encoded: &[u8], _quote: bool) -> Option<(String, &[u8])> {
        match encoded.split_first()? {
            (0, rest) => Some(("false".into(), rest)),
            (1, rest) => Some(("true".into(), rest)),
            _ => None,
        }
    }

    fn from_literal(literal: &Literal) -> Option<Self> {
        match literal {
            Literal::Bool(b) => Some(*b),
            _ => None,
        }
    }
}

/// What a write did to a record.
///
/// ```
/// # use tessera::collection::Record;
/// # #[derive(Record, Debug, Clone, PartialEq)]
/// # struct Task { #[record(key)] id: u32, title: String, #[record(index)] priority: i32, note: Option<String> }
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = tessera::Db::open(dir.path().join("db"))?;
/// # let tasks = db.collection::<Task>()?;
/// # let task = |id: u32, priority: i32| Task { id, title: format!("task {id}"), priority, note: None };
/// use tessera::WriteOutcome;
/// assert_eq!(db.write(|tx| tasks.upsert(tx, &task(1, 5)))?, WriteOutcome::Inserted);
/// assert_eq!(db.write(|tx| tasks.upsert(tx, &task(1, 5)))?, WriteOutcome::Unchanged);
/// assert_eq!(db.write(|tx| tasks.upsert(tx, &task(1, 6)))?, WriteOutcome::Updated);
/// assert_eq!(db.write(|tx| tasks.delete(tx, &1))?, WriteOutcome::Deleted);
/// # Ok::<(), tessera::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WriteOutcome {
    /// The key did not exist; the record was stored.
    Inserted,
    /// The record existed and changed.
    Updated,
    /// The new bytes are identical to the stored ones: nothing was written or published.
    Unchanged,
    /// The record was removed.
    Deleted,
}

/// Options for [`Db::collection_with`].
///
/// ```
/// use tessera::collection::{CollectionOptions, Record};
/// #[derive(Record)]
/// #[record(name = "notes")]
/// struct NoteV1 { #[record(key)] id: u32, text: String }
/// #[derive(Record)]
/// #[record(name = "notes", version = 2)]
/// struct Note { #[record(key)] id: u32, text: String, words: u32 }
/// # let dir = tempfile::tempdir().unwrap();
/// let db = tessera::Db::open(dir.path().join("db"))?;
/// let old = db.collection::<NoteV1>()?;
/// db.write(|tx| old.insert(tx, &NoteV1 { id: 1, text: "two words".into() }).map(drop))?;
/// drop(old);
/// let migrate = |old: tessera::value::Value<'_>| {
///     let text = old.get("text").and_then(|t| t.as_str()).unwrap_or_default().to_owned();
///     let id = old.get("id").and_then(|i| i.as_u64()).unwrap_or_default() as u32;
///     Ok(Note { id, words: text.split_whitespace().count() as u32, text })
/// };
/// let notes = db.collection_with(CollectionOptions { migrate: Some(Box::new(migrate)) })?;
/// assert_eq!(notes.get(&db, &1)?.map(|note| note.words), Some(2));
/// # Ok::<(), tessera::Error>(())
/// ```
pub struct CollectionOptions<T> {
    /// Converts a record stored under an older or incompatible schema to the current type. It
    /// runs over every record, once, in the transaction that opens the collection.
    #[allow(clippy::type_complexity)]
    pub migrate: Option<Box<dyn Fn(Value<'_>) -> Result<T> + Send + Sync>>,
}

impl<T> Default for CollectionOptions<T> {
    fn default() -> Self {
        CollectionOptions { migrate: None }
    }
}

/// Why a [`CollectionState`] no longer describes its collection (see
/// [`CollectionState::superseded`]).
pub(crate) struct Superseded {
    /// What changed the schema, as the error says it.
    reason: String,
    /// Only the indexes changed: records are still read by key as before.
    records_readable: bool,
}

impl Superseded {
    fn error(&self, collection: &str) -> Error {
        schema_error(collection, format!("{} after this handle was made: open the collection again", self.reason))
    }
}

/// One index's run-time state.
pub(crate) struct IndexState {
    pub(crate) path: String,
    pub(crate) unique: bool,
    pub(crate) id: u8,
    pub(crate) ready: AtomicBool,
    /// Why a background build stopped (for example an entry too long for an index key).
    pub(crate) failure: Mutex<Option<String>>,
}

/// Index identities (path, uniqueness, id) in sorted order: two index lists are the same
/// when these are, whatever their order and build state.
pub(crate) fn sorted_identities<'a>(identities: impl Iterator<Item = (&'a str, bool, u8)>) -> Vec<(&'a str, bool, u8)> {
    let mut list: Vec<(&str, bool, u8)> = identities.collect();
    list.sort_unstable();
    list
}

impl IndexState {
    /// Path, uniqueness and id: what a schema change may change (see [`sorted_identities`]).
    pub(crate) fn identity(&self) -> (&str, bool, u8) {
        (&self.path, self.unique, self.id)
    }

    pub(crate) fn new(index: &StoredIndex, ready: bool) -> Self {
        IndexState {
            path: index.path.clone(),
            unique: index.unique,
            id: index.id,
            ready: AtomicBool::new(ready),
            failure: Mutex::new(None),
        }
    }
}

/// What every handle on one collection shares.
pub(crate) struct CollectionState {
    pub(crate) name: String,
    pub(crate) records: Keyspace,
    pub(crate) index_keyspace: Keyspace,
    pub(crate) shape: TypeDesc,
    pub(crate) indexes: Vec<IndexState>,
    /// The shared keys records are written with, and the record type's field ids.
    pub(crate) keys: RecordKeys,
    /// The record type's [`Record::display_key`].
    key_text: fn(&[u8]) -> Option<String>,
    /// The key fields' encodings, set by a dynamic collection that knows them (see
    /// [`KeyKind`]): keys show as JSON values where `key_text` does not read them.
    pub(crate) key_kinds: std::sync::OnceLock<Vec<KeyKind>>,
    /// The type of the primary key's one field (`None` for a composite key), resolved once
    /// for the planner's exact key lookups.
    pub(crate) single_key_type: Option<TypeDesc>,
    /// Whether the store checks records against their checksums as it reads them (see
    /// [`open_stored`]).
    pub(crate) checksums_verified: bool,
    /// Set when another handle of this process, or another process, opened the collection
    /// with another shape, primary key or other indexes. Writes and planned reads through
    /// this state are then refused ([`CollectionState::current`]), and reads by key too unless
    /// only the indexes changed ([`CollectionState::readable_in`]).
    pub(crate) superseded: std::sync::OnceLock<Superseded>,
    /// Older states of this process with this state's schema, which this one replaced in the
    /// registry (another record type of the same shape and indexes: only the newest state is
    /// found there): superseded with it, or their handles would go on writing by the old
    /// indexes after a later open changed them.
    peers: Peers,
    /// Finds another process's schema change ([`CollectionState::current_in`]).
    schema_watch: schema_watch::SchemaWatch,
    type_id: std::any::TypeId,
}

impl CollectionState {
    /// `text` parsed as a whole query for this collection's records (typed and dynamic handles
    /// alike): an operand `true`, `false` or `null` spelt as a top-level field is named is an
    /// error at its column (see [`crate::query::Statement::parse_for_fields`]).
    pub(crate) fn parse_statement(&self, text: &str) -> Result<crate::query::Statement> {
        let names_variant = |path: &str, word: &str| {
            let desc = self.shape.resolve(path).map(schema::strip_option);
            matches!(desc, Some(TypeDesc::Enum(variants)) if variants.iter().any(|(variant, _)| variant.eq_ignore_ascii_case(word)))
        };
        let statement = crate::query::Statement::parse_for_fields(text, |word| self.shape.has_field(word), names_variant);
        Ok(statement.map_err(crate::query::QueryError::from)?)
    }

    /// `Ok` unless another handle of this process has since opened the collection with another
    /// shape or other indexes: this state's would then write records and index entries by the
    /// old ones, and read another index's entries as its own.
    #[inline]
    pub(crate) fn current(&self) -> Result<()> {
        match self.superseded.get() {
            None => Ok(()),
            Some(superseded) => Err(superseded.error(&self.name)),
        }
    }

    /// [`CollectionState::current`], and not changed by another process in what `view`
    /// includes (see `schema_watch.rs`): what every write and every planned read checks in its
    /// transaction.
    #[inline]
    pub(crate) fn current_in(&self, view: &dyn Snapshot) -> Result<()> {
        if let Some(older) = self.watch(view)? {
            return Err(older.error(&self.name));
        }
        self.current()
    }

    /// Whether records can be read by key in `view` through this state: they can when it is
    /// current, or when only the indexes changed (a read by key uses none); not when the shape
    /// or the primary key did, which this state would decode or find by the old ones.
    #[inline]
    pub(crate) fn readable_in(&self, view: &dyn Snapshot) -> Result<()> {
        if let Some(older) = self.watch(view)?.filter(|older| !older.records_readable) {
            return Err(older.error(&self.name));
        }
        match self.superseded.get() {
            Some(superseded) if !superseded.records_readable => Err(superseded.error(&self.name)),
            _ => Ok(()),
        }
    }

    /// Marks this state superseded if another process changed the schema in `view`. A view
    /// older than the state, with an older schema, supersedes nothing: returned, for that
    /// read alone to be refused. A schema record that cannot be read (damaged, or `view` is
    /// another database's: [`Error::ForeignKeyspace`]) is that error.
    #[inline]
    fn watch(&self, view: &dyn Snapshot) -> Result<Option<Superseded>> {
        if let Err(changed) = self.schema_watch.check(view, &self.shape, &self.indexes, &self.name) {
            if let Some(error) = changed.unreadable {
                return Err(*error);
            }
            let superseded = Superseded { reason: changed.reason, records_readable: changed.indexes_only };
            if changed.before_handle {
                return Ok(Some(superseded));
            }
            let _ = self.superseded.set(superseded);
        }
        Ok(None)
    }

    /// The error that ends this collection's live subscriptions when a commit wrote `stored`
    /// as its schema record (`None`: deleted it): one by which this state would no longer
    /// decode or find the records (another primary key or shape). `None` when they still read
    /// as before: the same schema, or other indexes only (a live subscription reads records,
    /// never an index, once it has started).
    pub(crate) fn schema_written(&self, stored: Option<&[u8]>) -> Option<Error> {
        let what = match stored {
            None => "schema record (it was deleted)",
            Some(bytes) => match self.schema_watch.difference(bytes, &self.shape, &self.indexes) {
                None | Some(schema_watch::INDEXES) => return None,
                Some(what) => what,
            },
        };
        Some(schema_error(
            &self.name,
            format!("a commit changed its {what} under a live subscription: open the collection and subscribe again"),
        ))
    }

    /// Marks this state as replaced by an open of the collection as record type `by`, with
    /// the shape `shape`, in this process (see [`CollectionState::current`]).
    pub(crate) fn supersede(&self, by: &'static str, shape: &TypeDesc) {
        let reason = format!("its schema was changed by opening it as `{by}`");
        let _ = self.superseded.set(Superseded { reason, records_readable: self.shape == *shape });
        // Each peer is older and holds its own older peers in this list already (see
        // `CollectionState::replaces`): one level reaches them all.
        for peer in lock_peers(&self.peers).iter().filter_map(std::sync::Weak::upgrade) {
            let reason = format!("its schema was changed by opening it as `{by}`");
            let _ = peer.superseded.set(Superseded { reason, records_readable: peer.shape == *shape });
        }
    }

    /// Records that this state replaces `older` (a state of this process with the same
    /// schema, still open) in the registry: `older`, and the states it replaced, are then
    /// superseded with this one.
    pub(crate) fn replaces(&self, older: &Arc<CollectionState>) {
        let mut peers: Vec<std::sync::Weak<CollectionState>> =
            lock_peers(&older.peers).iter().filter(|peer| peer.strong_count() > 0).cloned().collect();
        peers.push(Arc::downgrade(older));
        *lock_peers(&self.peers) = peers;
    }

    /// Whether this state has `shape` and `indexes` (paths, uniqueness and ids).
    pub(crate) fn same_schema(&self, shape: &TypeDesc, indexes: &[StoredIndex]) -> bool {
        self.shape == *shape
            && sorted_identities(self.indexes.iter().map(IndexState::identity))
                == sorted_identities(indexes.iter().map(|index| (index.path.as_str(), index.unique, index.id)))
    }

    /// A stored primary key as text for an error or `explain`: typed values when the bytes
    /// are a key of the record type, hex otherwise.
    pub(crate) fn display_key(&self, key: &[u8]) -> String {
        show_key_with(self.key_text, self.key_kinds.get().map_or(&[], Vec::as_slice), key)
    }

    /// Opens a stored record of this collection with its shared keys (see [`open_stored`]).
    pub(crate) fn open_record<'a>(&'a self, key: &[u8], bytes: &'a [u8]) -> Result<Doc<'a>> {
        self.open_stored(bytes).map_err(|error| self.decode_error(key, error))
    }

    /// [`open_stored`] with this collection's shared keys and the database's checksum policy.
    #[inline]
    pub(crate) fn open_stored<'a>(&'a self, bytes: &'a [u8]) -> std::result::Result<Doc<'a>, tessera_value::FormatError> {
        open_stored(bytes, &self.keys.shared, self.checksums_verified)
    }

    /// Encodes `record` into `out` with the collection's shared keys.
    pub(crate) fn encode<T: Record>(&self, record: &T, out: &mut Vec<u8>) -> Result<()> {
        tessera_value::codec::encode_into(record, Some(&self.keys.shared), &self.keys.ids, out)?;
        Ok(())
    }

    pub(crate) fn index_for(&self, path: &str) -> Option<&IndexState> {
        self.indexes.iter().find(|index| index.path == path && index.ready.load(Ordering::Acquire))
    }
}

/// A typed collection of `T`: cheap to clone; reads take a [`ReadSource`] (a `Db` or a
/// transaction), writes a [`WriteTxn`].
///
/// ```
/// # use tessera::collection::Record;
/// # #[derive(Record, Debug, Clone, PartialEq)]
/// # struct Task { #[record(key)] id: u32, title: String, #[record(index)] priority: i32, note: Option<String> }
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = tessera::Db::open(dir.path().join("db"))?;
/// # let tasks = db.collection::<Task>()?;
/// # let task = |id: u32, priority: i32| Task { id, title: format!("task {id}"), priority, note: None };
/// db.write(|tx| {
///     tasks.insert(tx, &task(1, 5))?;
///     tasks.insert(tx, &task(2, 9))
/// })?;
/// assert_eq!(tasks.get(&db, &2)?.map(|t| t.priority), Some(9));
/// assert_eq!(tasks.filter(Task::priority().gt(6)).count(&db)?, 1);
/// # Ok::<(), tessera::Error>(())
/// ```
pub struct Collection<T: Record> {
    pub(crate) db: Db,
    pub(crate) state: Arc<CollectionState>,
    _type: PhantomData<fn() -> T>,
}

impl<T: Record> Clone for Collection<T> {
    fn clone(&self) -> Self {
        Collection { db: self.db.clone(), state: self.state.clone(), _type: PhantomData }
    }
}

impl<T: Record> std::fmt::Debug for Collection<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Collection({:?})", self.state.name)
    }
}

impl Db {
    /// The collection of `T`, registering or checking its schema (see the module docs).
    /// Call it outside write transactions: it may write the schema.
    ///
    /// ```
    /// use tessera::collection::Record;
    /// #[derive(Record)]
    /// struct Task { #[record(key)] id: u32, title: String }
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let tasks = db.collection::<Task>()?;
    /// assert_eq!(tasks.name(), "Task");
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn collection<T: Record>(&self) -> Result<Collection<T>> {
        self.collection_with(CollectionOptions::default())
    }

    /// [`Db::collection`] with a migration for records stored under another schema.
    ///
    /// ```
    /// use tessera::collection::{CollectionOptions, Record};
    /// #[derive(Record)]
    /// struct Task { #[record(key)] id: u32 }
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let tasks = db.collection_with::<Task>(CollectionOptions::default())?; // no migration
    /// assert_eq!(tasks.all().count(&db)?, 0);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn collection_with<T: Record>(&self, options: CollectionOptions<T>) -> Result<Collection<T>> {
        let registry_key = format!("collection:{}", T::NAME);
        let state = self.shared_state_or(
            &registry_key,
            |state: &CollectionState| state.type_id == std::any::TypeId::of::<T>(),
            || {
                // Another handle of this process (another record type of the same name, or a
                // dynamic one) keeps its own shape and index list: once this open has changed
                // them, its writes and index reads would follow the old ones.
                let live = self.shared_state::<CollectionState>(&registry_key);
                let state = Arc::new(open_collection::<T>(self, &options, live.as_ref())?);
                if let Some(live) = live.filter(|live| live.superseded.get().is_none()) {
                    // Same schema (else the open superseded it): superseded with this one.
                    state.replaces(&live);
                }
                if state.indexes.iter().any(|index| !index.ready.load(Ordering::Acquire)) {
                    build::start(self, &state)?;
                }
                Ok(state)
            },
        )?;
        Ok(Collection { db: self.clone(), state, _type: PhantomData })
    }
}

/// Why the stored records cannot be read as `shape` without a migration although the shapes
/// are compatible: a number that a field turned into a float (or an `f64` turned `f32`)
/// would read rounded. Reads every record, only when such a field changed.
fn lossy_numbers<T: Record>(
    tx: &WriteTxn<'_>,
    records: &Keyspace,
    shared: &tessera_value::SharedKeys,
    verified: bool,
    shape: &TypeDesc,
    stored: &TypeDesc,
) -> Result<Option<String>> {
    let mut narrowed = Vec::new();
    shape.narrowed_numbers(stored, "", &mut narrowed);
    if narrowed.is_empty() {
        return Ok(None);
    }
    for entry in tx.range(records, ..)? {
        let (key, bytes) = entry?;
        let doc = open_stored(bytes, shared, verified)?;
        for (path, float) in &narrowed {
            if let Some(value) = schema::lossy_number(doc.root(), path, *float) {
                return Ok(Some(format!(
                    "field `{path}` became a float type, but the record with key {} holds {value}: migrate it",
                    T::display_key(key).unwrap_or_else(|| crate::store::key::hex(key))
                )));
            }
        }
    }
    Ok(None)
}

fn schema_error(collection: &str, reason: impl Into<String>) -> Error {
    Error::SchemaMismatch { collection: collection.to_owned(), reason: reason.into() }
}

/// Why the stored keys cannot be read as `shape` says, if a key field's type changed (an
/// integer widened from `u32` to `u64`, which the shapes alone accept): keys are encoded at the
/// field type's width, so a key of the new type would never find a stored record, and an
/// insert of the same id would be stored beside it. With the stored keys' encodings known
/// (`kinds`, recorded by a dynamic creation: a Python `int` is `i64`), the type must have that
/// encoding; otherwise (a record type stored them) it must be the stored type, or any integer
/// type where an older format stored `Int`. A migration re-encodes every key.
fn key_type_change(key_fields: &[String], kinds: &[KeyKind], shape: &TypeDesc, stored: &TypeDesc) -> Option<String> {
    key_fields.iter().enumerate().find_map(|(at, field)| {
        let (now, before) = (shape.resolve(field), stored.resolve(field));
        let agrees = match kinds.get(at) {
            Some(kind) if kinds.len() == key_fields.len() => now.is_some_and(|now| KeyKind::candidates(now).contains(kind)),
            // An integer stored as `Int` (a format before integer widths were recorded) says
            // nothing of its width: the type's is taken, as it always was.
            _ => now == before || (before == Some(&TypeDesc::Int) && matches!(now, Some(TypeDesc::Integer(_)))),
        };
        (!agrees).then(|| {
            format!("the type of primary key field `{field}` changed from {before:?} to {now:?}: stored keys keep the old encoding")
        })
    })
}

/// Older states superseded with a state: [`CollectionState::replaces`].
type Peers = std::sync::Mutex<Vec<std::sync::Weak<CollectionState>>>;

/// The peers list, whatever a panicking thread left in it (a list of weak references, valid
/// at every step).
fn lock_peers(peers: &Peers) -> std::sync::MutexGuard<'_, Vec<std::sync::Weak<CollectionState>>> {
    peers.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `Error::Corrupted` if collection `name` was created (its schema is stored) but its records
/// or index keyspace is missing: LMDB's main tree keeps the keyspaces' names without a
/// checksum, and a damaged name (or names out of order, which misdirect the lookup) would
/// otherwise open a new, empty keyspace in its place, and queries would return `Ok` with
/// nothing (found by the review of checking and salvage). One read at open.
fn refuse_missing_keyspaces(db: &Db, name: &str, records_name: &str, index_name: &str) -> Result<()> {
    let txn = db.read_txn_with_keyspaces(&[SCHEMA_KEYSPACE, records_name, index_name])?;
    let created = match db.opened_keyspace(SCHEMA_KEYSPACE) {
        Some(schemas) => txn.get(&schemas, name.as_bytes())?.is_some(),
        None => false,
    };
    let (records, index) = (db.opened_keyspace(records_name).is_some(), db.opened_keyspace(index_name).is_some());
    if (created || records || index) && !(records && index) {
        let missing = if records { index_name } else { records_name };
        return Err(Error::Corrupted(format!(
            "collection {name:?}: its keyspace `{missing}` is missing (its name in LMDB's main tree may be damaged: run `tessera check`)"
        )));
    }
    Ok(())
}

/// Refuses a multi-entry index (`path[]`) on a field that is not an array, and a unique one;
/// and a unique index on a field whose values its entries cannot tell apart (a struct, a list,
/// an enum with payloads).
fn check_indexes(name: &str, shape: &TypeDesc, indexes: &[IndexDef]) -> Result<()> {
    for index in indexes {
        if let Some(problem) = build::index_path_problem(shape, index.path, index.unique) {
            return Err(schema_error(name, problem));
        }
    }
    Ok(())
}

/// Opens collection `T::NAME` as `T`, writing its schema if it changed; `live` is the state of
/// this process's other handles, superseded if the schema changes.
fn open_collection<T: Record>(db: &Db, options: &CollectionOptions<T>, live: Option<&Arc<CollectionState>>) -> Result<CollectionState> {
    let name = T::NAME;
    crate::store::names::check("collection", name, COLLECTION_NAME_LEN_MAX)?;
    let shape = T::describe();
    for path in T::KEY_FIELDS.iter().chain(T::INDEXES.iter().map(|index| &index.path)) {
        if shape.resolve(build::elements_of(path).unwrap_or(path)).is_none() {
            return Err(schema_error(name, format!("key or index field `{path}` is not a field of the record")));
        }
    }
    check_indexes(name, &shape, T::INDEXES)?;
    let (records_name, index_name) = (format!("tessera.col.{name}"), format!("tessera.idx.{name}"));
    refuse_missing_keyspaces(db, name, &records_name, &index_name)?;
    let schema_keyspace = db.internal_keyspace(SCHEMA_KEYSPACE)?;
    let records = db.internal_keyspace(&records_name)?;
    let index_keyspace = db.internal_keyspace(&index_name)?;
    let keys_keyspace = db.internal_keyspace(keys::KEYS_KEYSPACE)?;
    let key_fields: Vec<String> = T::KEY_FIELDS.iter().map(|path| (*path).to_owned()).collect();
    let (schema, record_keys, made_at) = db.write(|tx| {
        let record_keys = keys::register::<T>(tx, &keys_keyspace, name)?;
        let stored = match tx.get(&schema_keyspace, name.as_bytes())? {
            Some(bytes) => Some(
                tessera_value::from_slice::<StoredSchema>(bytes)
                    .map_err(|error| Error::Corrupted(format!("schema of collection {name:?}: {error}")))?,
            ),
            None => None,
        };
        let is_empty = tx.range(&records, ..)?.next().is_none();
        let mut schema = StoredSchema {
            version: T::VERSION,
            key_fields: key_fields.clone(),
            shape: shape.clone(),
            indexes: Vec::new(),
            key_kinds: Vec::new(),
        };
        let mut migrate = false;
        if let Some(stored) = &stored {
            if stored.key_fields == key_fields {
                // Recorded by a dynamic collection's creation (the record type cannot say).
                schema.key_kinds = stored.key_kinds.clone();
            }
            let incompatible = if stored.key_fields != key_fields {
                Some(format!("the primary key changed from {:?} to {:?}", stored.key_fields, key_fields))
            } else if let Some(reason) = key_type_change(&key_fields, &stored.key_kinds, &shape, &stored.shape) {
                Some(reason)
            } else {
                match shape.incompatibility(&stored.shape, "") {
                    Some(reason) => Some(reason),
                    None if is_empty => None,
                    None => lossy_numbers::<T>(tx, &records, &record_keys.shared, db.verifies_checksums(), &shape, &stored.shape)?,
                }
            };
            match (&options.migrate, incompatible) {
                (Some(_), _) if stored.version != T::VERSION && !is_empty => migrate = true,
                (Some(_), Some(_)) if !is_empty => migrate = true,
                (None, Some(reason)) if !is_empty => {
                    return Err(schema_error(name, format!("{reason} (stored version {}, type version {})", stored.version, T::VERSION)));
                }
                _ => {}
            }
            // Keep the indexes that are still declared, with their ids and build state.
            schema.indexes = stored
                .indexes
                .iter()
                .filter(|index| T::INDEXES.iter().any(|d| d.path == index.path && d.unique == index.unique))
                .cloned()
                .collect();
            for dropped in stored.indexes.iter().filter(|index| !schema.indexes.iter().any(|kept| kept.id == index.id)) {
                build::clear_index(tx, &index_keyspace, dropped.id)?;
            }
        }
        for def in T::INDEXES {
            if !schema.indexes.iter().any(|index| index.path == def.path) {
                let id = schema.free_index_id().ok_or_else(|| schema_error(name, "more than 256 indexes"))?;
                schema.indexes.push(StoredIndex { path: def.path.to_owned(), unique: def.unique, id, ready: is_empty, failure: None });
            }
        }
        if migrate {
            let migration = options.migrate.as_ref().ok_or_else(|| schema_error(name, "no migration"))?;
            run_migration::<T>(tx, name, &records, &index_keyspace, &record_keys, &mut schema, migration.as_ref())?;
        } else {
            build_unique_indexes::<T>(tx, name, &records, &index_keyspace, &record_keys, &mut schema)?;
        }
        if stored.as_ref() != Some(&schema) {
            let bytes = tessera_value::to_vec(&schema)?;
            tx.put(&schema_keyspace, name.as_bytes(), &bytes)?;
        }
        // Superseded before this commit is seen: a write through the old handle waiting for
        // the writer lock, or a read of this commit, would otherwise run by the old indexes and
        // shape. (If the commit then fails, the old handle refuses what it need not.)
        if let Some(live) = live.filter(|live| !live.same_schema(&schema.shape, &schema.indexes)) {
            live.supersede(std::any::type_name::<T>(), &schema.shape);
        }
        // The schema is this handle's from this commit (if it writes it) on.
        Ok((schema, record_keys, tx.sequence()))
    })?;
    let indexes = schema.indexes.iter().map(|index| IndexState::new(index, index.ready)).collect();
    let single_key_type = match T::KEY_FIELDS {
        [field] => shape.resolve(field).cloned(),
        _ => None,
    };
    let checksums_verified = db.verifies_checksums();
    Ok(CollectionState {
        name: name.to_owned(),
        records,
        index_keyspace,
        shape,
        indexes,
        keys: record_keys,
        key_text: T::display_key,
        key_kinds: std::sync::OnceLock::new(),
        single_key_type,
        checksums_verified,
        superseded: std::sync::OnceLock::new(),
        peers: std::sync::Mutex::default(),
        schema_watch: schema_watch::SchemaWatch::new(schema_keyspace, key_fields, made_at),
        type_id: std::any::TypeId::of::<T>(),
    })
}

/// Opens stored record bytes with `keys`: in O(1) when the store checked them against their
/// checksum as it read them (`verified`: they are then, but for a 2^-32 chance, the bytes a
/// writer encoded, which the trusted reader assumes), else validated first, in linear time,
/// so that damaged bytes read with checksums off are an error, never a panic in the reader.
#[inline]
pub(crate) fn open_stored<'a>(
    bytes: &'a [u8],
    keys: &'a tessera_value::SharedKeys,
    verified: bool,
) -> std::result::Result<Doc<'a>, tessera_value::FormatError> {
    if verified { Doc::from_trusted_with_keys(bytes, keys) } else { crate::stored_doc::validate_with_keys(bytes, keys) }
}

/// Where a schema change (a unique index's build, a migration) writes index entries. It reads
/// records through the store and validates them whatever the checksum policy (a schema change
/// is rare, and runs before the collection's state exists).
fn schema_change_target<'a, T: Record>(
    name: &'a str,
    index_keyspace: &'a Keyspace,
    records: &'a Keyspace,
    record_keys: &'a RecordKeys,
) -> build::IndexTarget<'a> {
    build::IndexTarget {
        collection: name,
        keyspace: index_keyspace,
        records,
        keys: &record_keys.shared,
        key_text: T::display_key,
        key_kinds: &[],
        verified: false,
    }
}

/// Builds every new unique index over the existing records inside the schema change's own
/// transaction, as SQL's `CREATE UNIQUE INDEX` does: if two records hold one value, the error
/// names both keys and the transaction (so the schema change) is rolled back, so that a
/// declared constraint is never left unenforced. Other new indexes build in the background.
fn build_unique_indexes<T: Record>(
    tx: &mut WriteTxn<'_>,
    name: &str,
    records: &Keyspace,
    index_keyspace: &Keyspace,
    record_keys: &RecordKeys,
    schema: &mut StoredSchema,
) -> Result<()> {
    let building: Vec<IndexState> =
        schema.indexes.iter().filter(|index| index.unique && !index.ready).map(|index| IndexState::new(index, true)).collect();
    if building.is_empty() {
        return Ok(());
    }
    let stored = all_records(tx, records)?;
    let target = schema_change_target::<T>(name, index_keyspace, records, record_keys);
    for (key, bytes) in &stored {
        build::update_entries(tx, &target, &building, key, None, Some(bytes))?;
    }
    for index in schema.indexes.iter_mut().filter(|index| index.unique) {
        index.ready = true;
    }
    Ok(())
}

/// Every stored record, copied out of the transaction (which the caller then writes to).
fn all_records(tx: &WriteTxn<'_>, records: &Keyspace) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    tx.range(records, ..)?.map(|entry| entry.map(|(k, v)| (k.to_vec(), v.to_vec()))).collect()
}

/// Rewrites every record through `migrate` and rebuilds every index, inside `tx`.
fn run_migration<T: Record>(
    tx: &mut WriteTxn<'_>,
    name: &str,
    records: &Keyspace,
    index_keyspace: &Keyspace,
    record_keys: &RecordKeys,
    schema: &mut StoredSchema,
    migrate: &(dyn Fn(Value<'_>) -> Result<T> + Send + Sync),
) -> Result<()> {
    let stored = all_records(tx, records)?;
    let mut migrated = Vec::with_capacity(stored.len());
    for (key, bytes) in &stored {
        let doc = crate::stored_doc::validate_with_keys(bytes, &record_keys.shared)
            .map_err(|error| decode_error(name, T::display_key, key, error))?;
        migrated.push(migrate(doc.root())?);
        tx.delete(records, key)?;
    }
    let ids: Vec<u8> = schema.indexes.iter().map(|index| index.id).collect();
    for id in ids {
        build::clear_index(tx, index_keyspace, id)?;
    }
    let indexes: Vec<IndexState> = schema.indexes.iter().map(|index| IndexState::new(index, true)).collect();
    let (mut key, mut bytes) = (Vec::new(), Vec::new());
    for record in &migrated {
        key.clear();
        record.encode_key(&mut key);
        if tx.get(records, &key)?.is_some() {
            return Err(Error::DuplicateKey { collection: name.to_owned(), key: show_key(T::display_key, &key) });
        }
        tessera_value::codec::encode_into(record, Some(&record_keys.shared), &record_keys.ids, &mut bytes)?;
        tx.put(records, &key, &bytes)?;
        let target = schema_change_target::<T>(name, index_keyspace, records, record_keys);
        build::update_entries(tx, &target, &indexes, &key, None, Some(&bytes))?;
    }
    schema.version = T::VERSION;
    for index in &mut schema.indexes {
        index.ready = true;
    }
    Ok(())
}

/// A primary key's bytes in a form fit for an error message.
pub(crate) fn key_display(key: &[u8]) -> String {
    match crate::store::key::decode_bytes(key) {
        Some((text, [])) => String::from_utf8_lossy(&text).into_owned(),
        _ => crate::store::key::hex(key),
    }
}

/// A primary key as text: the record type's values where `key_text` (a
/// [`Record::display_key`]) reads the bytes, else [`key_display`]'s form.
pub(crate) fn show_key(key_text: fn(&[u8]) -> Option<String>, key: &[u8]) -> String {
    key_text(key).unwrap_or_else(|| key_display(key))
}

/// [`show_key`], or with `key_kinds` (a dynamic collection's) the key's values as JSON.
pub(crate) fn show_key_with(key_text: fn(&[u8]) -> Option<String>, key_kinds: &[KeyKind], key: &[u8]) -> String {
    key_text(key).or_else(|| dynamic::display_key(key_kinds, key)).unwrap_or_else(|| key_display(key))
}

/// A record of `collection` at `key` that does not open.
fn decode_error(collection: &str, key_text: fn(&[u8]) -> Option<String>, key: &[u8], error: impl std::fmt::Display) -> Error {
    Error::RecordDecode {
        collection: collection.to_owned(),
        key: show_key(key_text, key),
        field: String::new(),
        message: error.to_string(),
    }
}

impl CollectionState {
    /// [`decode_error`] for this collection's record type.
    pub(crate) fn decode_error(&self, key: &[u8], error: impl std::fmt::Display) -> Error {
        decode_error(&self.name, self.key_text, key, error)
    }

    /// The write path every handle shares, typed ([`Collection`]) or dynamic
    /// ([`DynCollection`]): writes `bytes` (a record encoded with this collection's shared
    /// keys) under `key` after `old` (the caller's copy of the stored bytes, read in this
    /// transaction, so that the transaction can be written and the change log need not read
    /// them again), maintaining indexes (unique ones refuse a taken value). Unchanged when the
    /// bytes are identical.
    pub(crate) fn store(&self, tx: &mut WriteTxn<'_>, key: &[u8], old: Option<&[u8]>, bytes: &[u8]) -> Result<WriteOutcome> {
        self.current_in(&*tx)?;
        if old == Some(bytes) {
            return Ok(WriteOutcome::Unchanged);
        }
        // Checked before the index entries change, so that a refused write changes nothing.
        if key.is_empty() || key.len() > crate::store::KEY_LEN_MAX {
            return Err(Error::KeySize { len: key.len(), max: crate::store::KEY_LEN_MAX });
        }
        if !self.indexes.is_empty() {
            build::update_entries(tx, &self.index_target(), &self.indexes, key, old, Some(bytes))?;
        }
        tx.put_after_read(&self.records, key, old, bytes)?;
        Ok(if old.is_some() { WriteOutcome::Updated } else { WriteOutcome::Inserted })
    }

    /// Deletes the record at `key` and its index entries: Deleted, or Unchanged if there was
    /// none. Shared by typed and dynamic handles, as [`CollectionState::store`] is.
    pub(crate) fn delete(&self, tx: &mut WriteTxn<'_>, key: &[u8]) -> Result<WriteOutcome> {
        self.current_in(&*tx)?;
        if self.indexes.is_empty() {
            // No index entries to find from the old record: delete without reading it.
            return Ok(if tx.delete(&self.records, key)? { WriteOutcome::Deleted } else { WriteOutcome::Unchanged });
        }
        let Some(old) = tx.get(&self.records, key)?.map(<[u8]>::to_vec) else {
            return Ok(WriteOutcome::Unchanged);
        };
        build::update_entries(tx, &self.index_target(), &self.indexes, key, Some(&old), None)?;
        tx.delete(&self.records, key)?;
        Ok(WriteOutcome::Deleted)
    }
}

/// Decodes a stored record with the generated codec: a stored value that does not fit `T` is
/// [`Error::RecordDecode`] naming the collection, the key and the field path.
///
/// A record whose key fields give another key than the one it is stored under is
/// [`Error::RecordDecode`] naming both keys: only a foreign writer, or damage that kept the
/// value's checksum, can store one, and it must not be read as the record at `key`.
pub(crate) fn decode<T: Record>(state: &CollectionState, key: &[u8], bytes: &[u8]) -> Result<T> {
    let doc = state.open_record(key, bytes)?;
    decode_value(state, key, doc.root())
}

/// [`decode`] of a record already opened: `root` is its value.
pub(crate) fn decode_value<T: Record>(state: &CollectionState, key: &[u8], root: tessera_value::Value<'_>) -> Result<T> {
    let record = T::decode(root, &state.keys.ids).map_err(|error| Error::RecordDecode {
        collection: state.name.clone(),
        key: state.display_key(key),
        field: error.path,
        message: error.problem.to_string(),
    })?;
    if !record.has_key(key) {
        let mut given = Vec::new();
        record.encode_key(&mut given);
        return Err(key_mismatch(state, T::KEY_FIELDS, key, Some(&given)));
    }
    Ok(record)
}

/// The error for a record stored under `key` whose key fields give another key, `given` when
/// known (see [`decode`]).
#[cold]
pub(crate) fn key_mismatch(state: &CollectionState, key_fields: &[&str], key: &[u8], given: Option<&[u8]>) -> Error {
    let given = given.map_or_else(|| "another key".to_owned(), |given| format!("the key {}", state.display_key(given)));
    Error::RecordDecode {
        collection: state.name.clone(),
        key: state.display_key(key),
        field: key_fields.join(", "),
        message: format!("its key fields give {given}, not the key it is stored under"),
    }
}

/// Runs `write` with a per-thread buffer for a record's bytes, reused across writes (a
/// fresh one when called re-entrantly).
fn with_buffer<R>(write: impl FnOnce(&mut Vec<u8>) -> Result<R>) -> Result<R> {
    with_buffers(|_, bytes| write(bytes))
}

/// Runs `write` with two empty per-thread buffers, for a primary key and a record's bytes,
/// reused across writes (fresh ones when called re-entrantly, as a write inside a migration
/// closure is): an insert then allocates nothing of its own.
fn with_buffers<R>(write: impl FnOnce(&mut Vec<u8>, &mut Vec<u8>) -> Result<R>) -> Result<R> {
    thread_local! {
        static BUFFERS: std::cell::RefCell<(Vec<u8>, Vec<u8>)> = const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
    }
    let (mut key, mut bytes) =
        BUFFERS.with(|cell| cell.try_borrow_mut().map(|mut buffers| std::mem::take(&mut *buffers)).unwrap_or_default());
    key.clear();
    bytes.clear();
    let result = write(&mut key, &mut bytes);
    BUFFERS.with(|cell| {
        if let Ok(mut slot) = cell.try_borrow_mut()
            && slot.1.capacity() <= bytes.capacity()
            && bytes.capacity() <= BUFFER_KEPT_BYTES_MAX
        {
            *slot = (key, bytes);
        }
    });
    result
}

/// Largest record buffer a thread keeps between writes: a rare large record's buffer is freed.
const BUFFER_KEPT_BYTES_MAX: usize = 1 << 20;

/// Runs `use_buffer` with an empty per-thread buffer for a primary key, reused across reads and
/// deletes by key so that they allocate nothing for their key (a fresh buffer when called
/// re-entrantly, as from a decoder that reads another record).
pub(crate) fn with_key_buffer<R>(use_buffer: impl FnOnce(&mut Vec<u8>) -> R) -> R {
    thread_local! {
        static KEY_BUFFER: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
    }
    // From a thread-local destructor the slot may be gone: a fresh buffer then.
    let mut buffer = KEY_BUFFER.try_with(std::cell::Cell::take).unwrap_or_default();
    buffer.clear();
    let result = use_buffer(&mut buffer);
    if buffer.capacity() <= KEY_BUFFER_KEPT_BYTES_MAX {
        // Ignored when the slot is gone (a thread-local destructor): the buffer is freed.
        let _ = KEY_BUFFER.try_with(|slot| slot.set(buffer));
    }
    result
}

/// Largest key buffer a thread keeps between reads by key (keys are at most
/// [`crate::store::KEY_LEN_MAX`] bytes, 511 today).
const KEY_BUFFER_KEPT_BYTES_MAX: usize = 1024;

impl<T: Record> Collection<T> {
    /// The collection's name.
    ///
    /// ```
    /// use tessera::collection::Record;
    /// #[derive(Record)]
    /// #[record(name = "todo")]
    /// struct Task { #[record(key)] id: u32 }
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// assert_eq!(db.collection::<Task>()?.name(), "todo");
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn name(&self) -> &str {
        &self.state.name
    }

    fn encode_key<Q: KeyPart + ?Sized>(key: &Q) -> Vec<u8> {
        let mut out = Vec::with_capacity(32);
        key.encode_key(&mut out);
        out
    }

    /// Runs `use_key` on `key` encoded into the thread's key buffer (see [`with_key_buffer`]).
    fn with_key<Q: KeyPart + ?Sized, R>(key: &Q, use_key: impl FnOnce(&[u8]) -> R) -> R {
        with_key_buffer(|buffer| {
            key.encode_key(buffer);
            use_key(buffer)
        })
    }

    /// Writes `bytes` under `key` after `old`: see [`CollectionState::store`].
    fn store(&self, tx: &mut WriteTxn<'_>, key: &[u8], old: Option<&[u8]>, bytes: &[u8]) -> Result<WriteOutcome> {
        self.state.store(tx, key, old, bytes)
    }

    /// Inserts `record`; [`Error::DuplicateKey`] if its key exists.
    ///
    /// ```
    /// # use serde::{Deserialize, Serialize};
    /// # use tessera::collection::Record;
    /// # #[derive(Serialize, Deserialize, Record)]
    /// # struct Tag { #[record(key)] name: String }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// let tags = db.collection::<Tag>()?;
    /// db.write(|tx| tags.insert(tx, &Tag { name: "rust".into() }))?;
    /// let again = db.write(|tx| tags.insert(tx, &Tag { name: "rust".into() }));
    /// assert!(matches!(again, Err(tessera::Error::DuplicateKey { .. })));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn insert(&self, tx: &mut WriteTxn<'_>, record: &T) -> Result<WriteOutcome> {
        with_buffers(|key, bytes| {
            record.encode_key(key);
            let duplicate = || Error::DuplicateKey { collection: self.state.name.clone(), key: self.state.display_key(key) };
            if self.state.indexes.is_empty() {
                // No index to maintain: one descent writes the record or finds the key taken.
                self.state.current_in(&*tx)?;
                self.state.encode(record, bytes)?;
                return if tx.insert_new_in(&self.state.records, key, bytes)? { Ok(WriteOutcome::Inserted) } else { Err(duplicate()) };
            }
            if tx.get(&self.state.records, key)?.is_some() {
                return Err(duplicate());
            }
            self.state.encode(record, bytes)?;
            self.store(tx, key, None, bytes)
        })
    }

    /// Inserts or replaces `record`: Inserted, Updated, or Unchanged when the stored bytes are
    /// identical (then nothing is written and no change is published).
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(Record, Debug, Clone, PartialEq)]
    /// # struct Task { #[record(key)] id: u32, title: String, #[record(index)] priority: i32, note: Option<String> }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let tasks = db.collection::<Task>()?;
    /// # let task = |id: u32, priority: i32| Task { id, title: format!("task {id}"), priority, note: None };
    /// use tessera::WriteOutcome;
    /// assert_eq!(db.write(|tx| tasks.upsert(tx, &task(1, 5)))?, WriteOutcome::Inserted);
    /// assert_eq!(db.write(|tx| tasks.upsert(tx, &task(1, 7)))?, WriteOutcome::Updated);
    /// assert_eq!(tasks.get(&db, &1)?.map(|t| t.priority), Some(7));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn upsert(&self, tx: &mut WriteTxn<'_>, record: &T) -> Result<WriteOutcome> {
        let mut key = Vec::with_capacity(32);
        record.encode_key(&mut key);
        let old = tx.get(&self.state.records, &key)?.map(<[u8]>::to_vec);
        with_buffer(|bytes| {
            self.state.encode(record, bytes)?;
            self.store(tx, &key, old.as_deref(), bytes)
        })
    }

    /// Reads the record at `key`, lets `change` edit it, and writes it back;
    /// [`Error::NotFound`] if there is none. The closure may not change the primary key.
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(Record, Debug, Clone, PartialEq)]
    /// # struct Task { #[record(key)] id: u32, title: String, #[record(index)] priority: i32, note: Option<String> }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let tasks = db.collection::<Task>()?;
    /// # let task = |id: u32, priority: i32| Task { id, title: format!("task {id}"), priority, note: None };
    /// db.write(|tx| tasks.insert(tx, &task(1, 5)))?;
    /// db.write(|tx| tasks.update(tx, &1, |t| t.priority += 1))?;
    /// assert_eq!(tasks.get(&db, &1)?.map(|t| t.priority), Some(6));
    /// let missing = db.write(|tx| tasks.update(tx, &2, |t| t.priority += 1));
    /// assert!(matches!(missing, Err(tessera::Error::NotFound { .. })));
    /// let rekeyed = db.write(|tx| tasks.update(tx, &1, |t| t.id = 3));
    /// assert!(matches!(rekeyed, Err(tessera::Error::KeyChanged { .. })));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn update<Q>(&self, tx: &mut WriteTxn<'_>, key: &Q, change: impl FnOnce(&mut T)) -> Result<WriteOutcome>
    where
        T::Key: Borrow<Q>,
        Q: KeyPart + ?Sized,
    {
        // A schema another handle or process changed is the error, not the decode of a record
        // of the new shape by this one.
        self.state.current_in(&*tx)?;
        let key = Self::encode_key(key);
        let old = tx.get(&self.state.records, &key)?.map(<[u8]>::to_vec);
        let Some(old) = old else {
            return Err(Error::NotFound { collection: self.state.name.clone(), key: self.state.display_key(&key) });
        };
        let mut record: T = decode(&self.state, &key, &old)?;
        change(&mut record);
        if !record.has_key(&key) {
            return Err(Error::KeyChanged { collection: self.state.name.clone(), key: self.state.display_key(&key) });
        }
        with_buffer(|bytes| {
            self.state.encode(&record, bytes)?;
            self.store(tx, &key, Some(&old), bytes)
        })
    }

    /// Sets one field (a dotted path; a missing optional field is added) of the record at
    /// `key`. The result must still decode as `T`, or the write is refused with a typed error.
    ///
    /// ```
    /// # use serde::{Deserialize, Serialize};
    /// # use tessera::collection::{Record, WriteOutcome};
    /// # #[derive(Serialize, Deserialize, Record)]
    /// # struct Task { #[record(key)] id: u32, done: bool }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// let tasks = db.collection::<Task>()?;
    /// db.write(|tx| tasks.insert(tx, &Task { id: 1, done: false }))?;
    /// assert_eq!(db.write(|tx| tasks.patch(tx, &1u32, "done", &true))?, WriteOutcome::Updated);
    /// assert!(db.write(|tx| tasks.patch(tx, &1u32, "done", &"yes")).is_err(), "wrong type");
    /// assert!(tasks.get(&db, &1u32)?.unwrap().done);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn patch<Q, V>(&self, tx: &mut WriteTxn<'_>, key: &Q, path: &str, value: &V) -> Result<WriteOutcome>
    where
        T::Key: Borrow<Q>,
        Q: KeyPart + ?Sized,
        V: Serialize + ?Sized,
    {
        if self.state.shape.resolve(path).is_none() {
            // A path the record type does not have would be written and then dropped by the
            // decode check: the record would come back Unchanged although nothing was set.
            return Err(Error::UnknownField { collection: self.state.name.clone(), path: path.to_owned() });
        }
        self.state.current_in(&*tx)?; // as `update`
        let key = Self::encode_key(key);
        let Some(old) = tx.get(&self.state.records, &key)?.map(<[u8]>::to_vec) else {
            return Err(Error::NotFound { collection: self.state.name.clone(), key: self.state.display_key(&key) });
        };
        if T::KEY_FIELDS.contains(&path) {
            return Err(Error::KeyChanged { collection: self.state.name.clone(), key: self.state.display_key(&key) });
        }
        let value_bytes = tessera_value::to_vec(value)?;
        let value_doc = Doc::from_trusted(&value_bytes)?;
        // The decode below would drop a key the field's type does not have (a misspelled one,
        // in a `serde_json::Value`), and the write would return Ok without it.
        if let Some(unknown) = self.state.shape.resolve(path).and_then(|shape| shape.unknown_field(value_doc.root(), path)) {
            return Err(Error::UnknownField { collection: self.state.name.clone(), path: unknown });
        }
        let doc = self.state.open_record(&key, &old)?;
        let mut edit = tessera_value::MutableDoc::new(doc);
        let (parent, last) = match path.rsplit_once('.') {
            Some((parent, last)) => (Some(parent), last),
            None => (None, path),
        };
        let field_error = |error: tessera_value::MutateError| Error::RecordDecode {
            collection: self.state.name.clone(),
            key: self.state.display_key(&key),
            field: path.to_owned(),
            message: format!("cannot set it: {error}"),
        };
        let target = match parent {
            Some(parent) => edit.root_mut().path_mut(parent).map_err(field_error)?,
            None => edit.root_mut(),
        };
        target.set(last, value_doc.root()).map_err(field_error)?;
        let bytes = edit.encode()?;
        // The patched record must still be a `T`: decode it once, and store its canonical bytes.
        let record: T = decode(&self.state, &key, &bytes)?;
        with_buffer(|canonical| {
            self.state.encode(&record, canonical)?;
            self.store(tx, &key, Some(&old), canonical)
        })
    }

    /// Deletes the record at `key`: Deleted, or Unchanged if there was none.
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(Record, Debug, Clone, PartialEq)]
    /// # struct Task { #[record(key)] id: u32, title: String, #[record(index)] priority: i32, note: Option<String> }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let tasks = db.collection::<Task>()?;
    /// # let task = |id: u32, priority: i32| Task { id, title: format!("task {id}"), priority, note: None };
    /// use tessera::WriteOutcome;
    /// db.write(|tx| tasks.insert(tx, &task(1, 5)))?;
    /// assert_eq!(db.write(|tx| tasks.delete(tx, &1))?, WriteOutcome::Deleted);
    /// assert_eq!(db.write(|tx| tasks.delete(tx, &1))?, WriteOutcome::Unchanged);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn delete<Q>(&self, tx: &mut WriteTxn<'_>, key: &Q) -> Result<WriteOutcome>
    where
        T::Key: Borrow<Q>,
        Q: KeyPart + ?Sized,
    {
        Self::with_key(key, |key_bytes| self.delete_encoded(tx, key_bytes))
    }

    pub(crate) fn delete_encoded(&self, tx: &mut WriteTxn<'_>, key: &[u8]) -> Result<WriteOutcome> {
        self.state.delete(tx, key)
    }

    /// Deletes every record the query matches; returns how many.
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(Record, Debug, Clone, PartialEq)]
    /// # struct Task { #[record(key)] id: u32, title: String, #[record(index)] priority: i32, note: Option<String> }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let tasks = db.collection::<Task>()?;
    /// # let task = |id: u32, priority: i32| Task { id, title: format!("task {id}"), priority, note: None };
    /// db.write(|tx| (1..=5).try_for_each(|id| tasks.insert(tx, &task(id, id as i32)).map(drop)))?;
    /// let low = tasks.filter(Task::priority().lt(3));
    /// assert_eq!(db.write(|tx| tasks.delete_where(tx, &low))?, 2);
    /// assert_eq!(tasks.all().count(&db)?, 3);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn delete_where(&self, tx: &mut WriteTxn<'_>, query: &Query<T>) -> Result<usize> {
        let keys = query.matching_keys(&*tx)?;
        for key in &keys {
            self.delete_encoded(tx, key)?;
        }
        Ok(keys.len())
    }

    /// The record at `key`.
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(Record, Debug, Clone, PartialEq)]
    /// # struct Task { #[record(key)] id: u32, title: String, #[record(index)] priority: i32, note: Option<String> }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let tasks = db.collection::<Task>()?;
    /// # let task = |id: u32, priority: i32| Task { id, title: format!("task {id}"), priority, note: None };
    /// db.write(|tx| tasks.insert(tx, &task(1, 5)))?;
    /// assert_eq!(tasks.get(&db, &1)?, Some(task(1, 5)));
    /// assert_eq!(tasks.get(&db, &2)?, None);
    /// let tx = db.read_txn()?; // or inside one snapshot
    /// assert!(tasks.get(&tx, &1)?.is_some());
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn get<Q>(&self, source: &impl ReadSource, key: &Q) -> Result<Option<T>>
    where
        T::Key: Borrow<Q>,
        Q: KeyPart + ?Sized,
    {
        Self::with_key(key, |key_bytes| source.with_snapshot(|snapshot| self.get_encoded(snapshot, key_bytes)))
    }

    /// The record at `key`, read in place from `snapshot` (a read or write transaction): no
    /// decode until a field is read, and the view cannot outlive the transaction. See
    /// [`RecordRef`].
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(Record, Debug, Clone, PartialEq)]
    /// # struct Task { #[record(key)] id: u32, title: String, #[record(index)] priority: i32, note: Option<String> }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let tasks = db.collection::<Task>()?;
    /// # let task = |id: u32, priority: i32| Task { id, title: format!("task {id}"), priority, note: None };
    /// db.write(|tx| tasks.insert(tx, &task(1, 5)))?;
    /// let tx = db.read_txn()?;
    /// let view = tasks.get_ref(&tx, &1)?.expect("stored");
    /// let title: &str = view.title()?; // borrowed from the map: nothing decoded
    /// assert_eq!((title, view.priority()?), ("task 1", 5));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn get_ref<'t, Q>(&'t self, snapshot: &'t impl Snapshot, key: &Q) -> Result<Option<RecordRef<'t, T>>>
    where
        T::Key: Borrow<Q>,
        Q: KeyPart + ?Sized,
    {
        let key_bytes = Self::encode_key(key);
        let state = &*self.state;
        state.readable_in(snapshot)?;
        match snapshot.get_value(&state.records, &key_bytes)? {
            Some(bytes) => {
                let doc = state.open_record(&key_bytes, bytes)?;
                RecordRef::new(state, &key_bytes, doc.root()).map(Some)
            }
            None => Ok(None),
        }
    }

    #[inline]
    pub(crate) fn get_encoded(&self, snapshot: &dyn Snapshot, key: &[u8]) -> Result<Option<T>> {
        self.state.readable_in(snapshot)?;
        match snapshot.get_value(&self.state.records, key)? {
            Some(bytes) => decode(&self.state, key, bytes).map(Some),
            None => Ok(None),
        }
    }

    /// The records at `keys`, in order (`None` where missing), from one snapshot.
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(Record, Debug, Clone, PartialEq)]
    /// # struct Task { #[record(key)] id: u32, title: String, #[record(index)] priority: i32, note: Option<String> }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let tasks = db.collection::<Task>()?;
    /// # let task = |id: u32, priority: i32| Task { id, title: format!("task {id}"), priority, note: None };
    /// db.write(|tx| tasks.insert(tx, &task(1, 5)))?;
    /// let found = tasks.get_many(&db, &[1, 2])?;
    /// assert_eq!(found, [Some(task(1, 5)), None]);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn get_many<'k, Q>(&self, source: &impl ReadSource, keys: impl IntoIterator<Item = &'k Q>) -> Result<Vec<Option<T>>>
    where
        T::Key: Borrow<Q>,
        Q: KeyPart + ?Sized + 'k,
    {
        source.with_snapshot(|snapshot| {
            let mut buffer = Vec::with_capacity(32);
            keys.into_iter()
                .map(|key| {
                    buffer.clear();
                    key.encode_key(&mut buffer);
                    self.get_encoded(snapshot, &buffer)
                })
                .collect()
        })
    }

    /// Every record, in primary-key order, as a query to refine.
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(Record, Debug, Clone, PartialEq)]
    /// # struct Task { #[record(key)] id: u32, title: String, #[record(index)] priority: i32, note: Option<String> }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let tasks = db.collection::<Task>()?;
    /// # let task = |id: u32, priority: i32| Task { id, title: format!("task {id}"), priority, note: None };
    /// db.write(|tx| [3, 1, 2].into_iter().try_for_each(|id| tasks.insert(tx, &task(id, 0)).map(drop)))?;
    /// let ids: Vec<u32> = tasks.all().fetch(&db)?.into_iter().map(|t| t.id).collect();
    /// assert_eq!(ids, [1, 2, 3], "primary-key order");
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn all(&self) -> Query<T> {
        Query::new(self.clone(), None)
    }

    /// The records matching `predicate`, as a query to refine (order, limit, offset) and run.
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(Record, Debug, Clone, PartialEq)]
    /// # struct Task { #[record(key)] id: u32, title: String, #[record(index)] priority: i32, note: Option<String> }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let tasks = db.collection::<Task>()?;
    /// # let task = |id: u32, priority: i32| Task { id, title: format!("task {id}"), priority, note: None };
    /// db.write(|tx| (1..=4).try_for_each(|id| tasks.insert(tx, &task(id, id as i32 * 10)).map(drop)))?;
    /// let busy = tasks.filter(Task::priority().ge(20).and(Task::note().is_null()));
    /// assert_eq!(busy.count(&db)?, 3);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn filter(&self, predicate: Expr) -> Query<T> {
        Query::new(self.clone(), Some(predicate))
    }

    /// [`Collection::filter`] from the text syntax (see [`crate::query`]): a typed error with
    /// the column if it does not parse, or if it does not type-check against `T`. The same as
    /// [`Collection::query_text`]: the text may also have `order by`, `limit` and `offset`.
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(Record, Debug, Clone, PartialEq)]
    /// # struct Task { #[record(key)] id: u32, title: String, #[record(index)] priority: i32, note: Option<String> }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let tasks = db.collection::<Task>()?;
    /// # let task = |id: u32, priority: i32| Task { id, title: format!("task {id}"), priority, note: None };
    /// db.write(|tx| (1..=4).try_for_each(|id| tasks.insert(tx, &task(id, id as i32)).map(drop)))?;
    /// assert_eq!(tasks.filter_text("priority >= 3")?.count(&db)?, 2);
    /// let error = tasks.filter_text("priority >=").unwrap_err();
    /// assert!(error.to_string().contains("column"), "{error}");
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn filter_text(&self, text: &str) -> Result<Query<T>> {
        self.query_text(text)
    }

    /// Whether every index has been built (new indexes build in the background).
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(Record, Debug, Clone, PartialEq)]
    /// # struct Task { #[record(key)] id: u32, title: String, #[record(index)] priority: i32, note: Option<String> }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let tasks = db.collection::<Task>()?;
    /// # let task = |id: u32, priority: i32| Task { id, title: format!("task {id}"), priority, note: None };
    /// assert!(tasks.wait_for_indexes(std::time::Duration::from_secs(10)));
    /// assert!(tasks.indexes_ready());
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn indexes_ready(&self) -> bool {
        self.state.indexes.iter().all(|index| index.ready.load(Ordering::Acquire))
    }

    /// Why an index's background build stopped, if it did (for example an entry too long for
    /// an index key). Unique indexes never build in the background: see [`Db::collection`].
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(Record, Debug, Clone, PartialEq)]
    /// # struct Task { #[record(key)] id: u32, title: String, #[record(index)] priority: i32, note: Option<String> }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let tasks = db.collection::<Task>()?;
    /// # let task = |id: u32, priority: i32| Task { id, title: format!("task {id}"), priority, note: None };
    /// assert!(tasks.wait_for_indexes(std::time::Duration::from_secs(10)));
    /// assert_eq!(tasks.index_failure("priority"), None);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn index_failure(&self, path: &str) -> Option<String> {
        let index = self.state.indexes.iter().find(|index| index.path == path)?;
        index.failure.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Waits until every index is built, or `timeout` passes; returns whether they are.
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(Record, Debug, Clone, PartialEq)]
    /// # struct Task { #[record(key)] id: u32, title: String, #[record(index)] priority: i32, note: Option<String> }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let tasks = db.collection::<Task>()?;
    /// # let task = |id: u32, priority: i32| Task { id, title: format!("task {id}"), priority, note: None };
    /// db.write(|tx| tasks.insert(tx, &task(1, 5)))?;
    /// if tasks.wait_for_indexes(std::time::Duration::from_secs(10)) {
    ///     assert!(tasks.filter(Task::priority().eq(5)).explain()?.to_string().contains("index"));
    /// }
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn wait_for_indexes(&self, timeout: std::time::Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        while !self.indexes_ready() {
            if std::time::Instant::now() >= deadline
                || self.state.indexes.iter().any(|i| i.failure.lock().map(|f| f.is_some()).unwrap_or(true))
            {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        true
    }
}

/// Checks collection `name` for [`crate::Db::check`]: its schema and shared keys parse, every
/// record validates, and its indexes hold exactly one entry per record and built index. `txn`
/// was begun with the collection's keyspaces open ([`Db::read_txn_with_keyspaces`]).
pub(crate) fn check(db: &Db, txn: &crate::store::ReadTxn<'_>, name: &str, report: &mut crate::CheckReport) -> Result<()> {
    let Some(records) = db.opened_keyspace(&format!("tessera.col.{name}")) else { return Ok(()) };
    let schema = match db.opened_keyspace(SCHEMA_KEYSPACE) {
        Some(keyspace) => txn.get(&keyspace, name.as_bytes())?.map(tessera_value::from_slice::<StoredSchema>),
        None => None,
    };
    let schema = match schema {
        Some(Ok(schema)) => schema,
        Some(Err(error)) => {
            report.problem(SCHEMA_KEYSPACE, name.as_bytes(), format!("schema of collection {name:?} does not parse: {error}"));
            return Ok(());
        }
        None => {
            report.problem(SCHEMA_KEYSPACE, name.as_bytes(), format!("collection {name:?} has records but no schema"));
            return Ok(());
        }
    };
    let shared = match db.opened_keyspace(keys::KEYS_KEYSPACE) {
        Some(keyspace) => keys::load(txn, &keyspace, name),
        None => Ok(tessera_value::SharedKeys::new()),
    };
    let shared = match shared {
        Ok(shared) => shared,
        Err(error) => {
            report.problem(keys::KEYS_KEYSPACE, name.as_bytes(), error.to_string());
            return Ok(());
        }
    };
    let indexes: Vec<IndexState> = schema.indexes.iter().filter(|index| index.ready).map(|index| IndexState::new(index, true)).collect();
    let index_keyspace = db.opened_keyspace(&format!("tessera.idx.{name}"));
    // A read-only handle reads a file of format 5 or 6 without migrating its entries.
    let layout = if db.format_version_in(txn)? < upgrade::RESIDUAL_NUMBERS_FORMAT {
        sort_key::NumberLayout::SaturatedI64
    } else {
        sort_key::NumberLayout::Residual
    };
    let mut expected = 0u64;
    let mut components = Vec::new();
    for entry in txn.range(&records, ..)? {
        let (key, bytes) = entry?;
        report.entries += 1;
        if let Err(error) = crate::stored_doc::validate_with_keys(bytes, &shared) {
            report.problem(records.name(), key, format!("record does not validate: {error}"));
            continue;
        }
        let Some(index_keyspace) = &index_keyspace else { continue };
        for index in &indexes {
            build::components_in(Some(bytes), &shared, false, &index.path, layout, &mut components)?;
            let entries = match build::entry_keys(index, &components, key) {
                Ok(entries) => entries,
                Err(error) => {
                    expected += 1;
                    report.problem(records.name(), key, format!("index `{}` cannot hold this record: {error}", index.path));
                    continue;
                }
            };
            for entry in entries {
                expected += 1;
                match txn.get(index_keyspace, &entry)? {
                    Some(holder) if holder == key => {}
                    Some(_) => report.problem(
                        index_keyspace.name(),
                        &entry,
                        format!("index `{}` entry of this record names another key", index.path),
                    ),
                    None => report.problem(
                        index_keyspace.name(),
                        &entry,
                        format!("index `{}` has no entry for record {}", index.path, key_display(key)),
                    ),
                }
            }
        }
    }
    let Some(index_keyspace) = &index_keyspace else { return Ok(()) };
    let mut found = 0u64;
    for entry in txn.range(index_keyspace, ..)? {
        let (entry_key, primary) = entry?;
        report.entries += 1;
        let Some(index) = indexes.iter().find(|index| entry_key.first() == Some(&index.id)) else { continue };
        found += 1;
        match txn.get(&records, primary)? {
            None => report.problem(
                index_keyspace.name(),
                entry_key,
                format!("index `{}` entry points at key {}, which has no record", index.path, key_display(primary)),
            ),
            // A record that does not validate was reported above.
            Some(bytes) if crate::stored_doc::validate_with_keys(bytes, &shared).is_err() => {}
            Some(bytes) => {
                build::components_in(Some(bytes), &shared, false, &index.path, layout, &mut components)?;
                let matches =
                    components.iter().any(|component| build::entry_key(index, component, primary).ok().as_deref() == Some(entry_key));
                if !matches {
                    report.problem(
                        index_keyspace.name(),
                        entry_key,
                        format!("index `{}` entry does not match its record's value", index.path),
                    );
                }
            }
        }
    }
    if found != expected {
        report.problem(index_keyspace.name(), &[], format!("{found} entries in built indexes, {expected} expected from the records"));
    }
    Ok(())
}
