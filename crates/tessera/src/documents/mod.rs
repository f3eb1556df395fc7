//! Field-decomposed documents: a typed value stored as one key per field, so that one field can
//! be written, read and observed without touching the rest.
//!
//! **Key layout.** A document's key prefix is its id in the order-preserving encoding of
//! `store::key` (bytes with 0x00 escaped, then a terminator), so no id is a prefix of another's
//! keys (`"a:"` and `"a"` never collide) and ids list in order. A field's key is the prefix
//! followed by the field's name (deep decomposition: the names along the path, separated by
//! 0x00). A document's fields are found by one prefix scan over its own keys: the cost follows
//! the document, not the store.
//!
//! **Values.** Each field is one tessera binary document, written by the serde serializer, so
//! names come from serde (`rename` is respected on every path). Reading, a missing field takes
//! its serde default (or `None`), an unknown stored field is ignored, and a field that fails to
//! decode is an error that names the document and the field. No type is recorded with a
//! document, so it reads as any type whose fields it has or that may go without them: a struct
//! whose fields are all optional reads any document as `Some`, its fields `None`. The format
//! has one null, as JSON does: `Some(None)` of an `Option<Option<_>>` reads back as `None`.
//!
//! **A document is its stored fields.** It exists while it has at least one, so a value that
//! stores none (an empty map, a struct whose every field is skipped when serialized) cannot be
//! set: [`Document::set`] refuses it with [`crate::Error::DocumentField`] rather than store a
//! document that would read back as absent.
//!
//! **Deep documents.** A field is its key and every key under it: [`Document::update_field`]
//! of a whole nested struct replaces its leaves, and [`FieldHandle::get`] and
//! [`Document::observe_field`] read and watch the leaves, assembled as [`Document::get`]
//! assembles them. A value stored both at a path and under it (`a` and `a.b`) makes no
//! document: reading it is an error naming the field. A deep handle reads what a plain one
//! stored; a plain handle refuses a nested field's own key (`a.b`), naming it, rather than read
//! the document without it.
//!
//! **Atomicity.** `set` removes the old fields and writes the new ones in one transaction, and
//! every operation has an `_in` form that joins a caller's `db.write` transaction. LMDB's single
//! writer makes two handles to one document exclude each other, and the database's one change
//! feed lets each see the other's writes.

mod fields;
mod observe;
mod probe;

use crate::error::{Error, Result};
use crate::live::ValueSubscription;
use crate::store::{Db, Durability, Entries, Keyspace, ReadTxn, WriteTxn, key};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::marker::PhantomData;
use std::sync::Arc;

/// Separator between the names of a deep field path in a key.
const PATH_SEPARATOR: u8 = 0;

/// A per-field bytes-in, bytes-out hook (encryption, compression), applied on every path that
/// writes or reads a field.
///
/// ```
/// use std::sync::Arc;
/// use tessera::documents::{DocumentsOptions, FieldTransform};
/// /// Reverses each field's bytes (a stand-in for encryption).
/// struct Reversed;
/// impl FieldTransform for Reversed {
///     fn encode(&self, _field: &str, mut bytes: Vec<u8>) -> Vec<u8> { bytes.reverse(); bytes }
///     fn decode(&self, _field: &str, bytes: &[u8]) -> Result<Vec<u8>, String> { Ok(bytes.iter().rev().copied().collect()) }
/// }
/// # let dir = tempfile::tempdir().unwrap();
/// let db = tessera::Db::open(dir.path().join("db"))?;
/// let options = DocumentsOptions { transform: Some(Arc::new(Reversed)), ..Default::default() };
/// let notes = db.documents_with("notes", options)?.document::<std::collections::BTreeMap<String, String>>("n1");
/// notes.set(&[("text".to_owned(), "secret".to_owned())].into())?;
/// assert_eq!(notes.get()?.unwrap()["text"], "secret");
/// # Ok::<(), tessera::Error>(())
/// ```
pub trait FieldTransform: Send + Sync {
    /// Transforms a field's encoded value before it is stored.
    ///
    /// ```
    /// use tessera::documents::FieldTransform;
    /// struct Xor(u8);
    /// impl FieldTransform for Xor {
    ///     fn encode(&self, _field: &str, bytes: Vec<u8>) -> Vec<u8> { bytes.into_iter().map(|b| b ^ self.0).collect() }
    ///     fn decode(&self, _field: &str, bytes: &[u8]) -> Result<Vec<u8>, String> { Ok(bytes.iter().map(|b| b ^ self.0).collect()) }
    /// }
    /// let stored = Xor(0x5A).encode("name", b"Ada".to_vec());
    /// assert_ne!(stored, b"Ada");
    /// assert_eq!(Xor(0x5A).decode("name", &stored).unwrap(), b"Ada");
    /// ```
    fn encode(&self, field: &str, bytes: Vec<u8>) -> Vec<u8>;
    /// Reverses [`FieldTransform::encode`]; an `Err` becomes a decode error for that field.
    ///
    /// ```
    /// use tessera::documents::FieldTransform;
    /// /// Refuses what it did not write: a decode error names the field.
    /// struct Tagged;
    /// impl FieldTransform for Tagged {
    ///     fn encode(&self, _field: &str, mut bytes: Vec<u8>) -> Vec<u8> { bytes.insert(0, 0xA5); bytes }
    ///     fn decode(&self, field: &str, bytes: &[u8]) -> Result<Vec<u8>, String> {
    ///         match bytes.split_first() {
    ///             Some((0xA5, rest)) => Ok(rest.to_vec()),
    ///             _ => Err(format!("field {field}: not written by this transform")),
    ///         }
    ///     }
    /// }
    /// assert_eq!(Tagged.decode("age", &Tagged.encode("age", vec![1, 2])).unwrap(), [1, 2]);
    /// assert!(Tagged.decode("age", &[1, 2]).is_err());
    /// ```
    fn decode(&self, field: &str, bytes: &[u8]) -> std::result::Result<Vec<u8>, String>;
}

/// Options for [`Db::documents_with`].
///
/// ```
/// use tessera::documents::DocumentsOptions;
/// use tessera::Durability;
/// #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
/// struct Place { city: String }
/// #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
/// struct Person { name: String, home: Place }
/// # let dir = tempfile::tempdir().unwrap();
/// let db = tessera::Db::open(dir.path().join("db"))?;
/// let options = DocumentsOptions { durability: Durability::Immediate, deep: true, transform: None };
/// let ada = db.documents_with("people", options)?.document::<Person>("ada");
/// ada.set(&Person { name: "Ada".into(), home: Place { city: "London".into() } })?;
/// ada.update_field("home.city", "Paris")?; // deep: one key for the nested field
/// assert_eq!(ada.get()?.unwrap().home.city, "Paris");
/// # Ok::<(), tessera::Error>(())
/// ```
#[derive(Clone)]
pub struct DocumentsOptions {
    /// Durability of this collection's writes (MMKV-class `Buffered` by default).
    pub durability: Durability,
    /// Store nested structs and maps as one key per leaf (`a.b.c`) instead of one per
    /// top-level field.
    pub deep: bool,
    /// Per-field transform.
    pub transform: Option<Arc<dyn FieldTransform>>,
}

impl Default for DocumentsOptions {
    fn default() -> Self {
        DocumentsOptions { durability: Durability::BUFFERED, deep: false, transform: None }
    }
}

impl std::fmt::Debug for DocumentsOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DocumentsOptions")
            .field("durability", &self.durability)
            .field("deep", &self.deep)
            .field("transform", &self.transform.is_some())
            .finish()
    }
}

pub(crate) struct Collection {
    pub(crate) db: Db,
    pub(crate) keyspace: Keyspace,
    pub(crate) name: Arc<str>,
    pub(crate) options: DocumentsOptions,
}

/// A collection of documents with its own keyspace. Cheap to clone.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq, Clone)]
/// struct Profile { name: String, age: u32 }
/// let db = tessera::Db::open(dir.path().join("db"))?;
/// let profiles = db.documents("profiles")?;
/// let ada = profiles.document::<Profile>("ada");
/// ada.set(&Profile { name: "Ada".into(), age: 36 })?;
/// ada.update_field("age", &37u32)?;               // one key, no read
/// assert_eq!(ada.get()?, Some(Profile { name: "Ada".into(), age: 37 }));
/// assert_eq!(ada.field::<u32>("age").get()?, Some(37));
/// # Ok::<(), tessera::Error>(())
/// ```
#[derive(Clone)]
pub struct Documents {
    collection: Arc<Collection>,
}

/// Prefix of a document collection's keyspace.
pub(crate) const DOCUMENTS_KEYSPACE_PREFIX: &str = "tessera.documents.";

/// Longest document collection name: what fits a keyspace name after `tessera.documents.`.
///
/// ```
/// use tessera::documents::DOCUMENTS_NAME_LEN_MAX;
/// # let dir = tempfile::tempdir().unwrap();
/// let db = tessera::Db::open(dir.path().join("db"))?;
/// assert!(db.documents(&"d".repeat(DOCUMENTS_NAME_LEN_MAX)).is_ok());
/// assert!(matches!(db.documents(&"d".repeat(DOCUMENTS_NAME_LEN_MAX + 1)), Err(tessera::Error::InvalidName { .. })));
/// # Ok::<(), tessera::Error>(())
/// ```
pub const DOCUMENTS_NAME_LEN_MAX: usize = crate::store::names::len_max_after(DOCUMENTS_KEYSPACE_PREFIX);

impl Db {
    /// The document collection `name`, with default options. A name is 1 to
    /// [`DOCUMENTS_NAME_LEN_MAX`] bytes without NUL ([`crate::Error::InvalidName`] otherwise).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// assert!(db.documents("profiles").is_ok());
    /// assert!(matches!(db.documents(""), Err(tessera::Error::InvalidName { what: "documents", .. })));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn documents(&self, name: &str) -> Result<Documents> {
        self.documents_with(name, DocumentsOptions::default())
    }

    /// The document collection `name`, with options.
    ///
    /// ```
    /// use tessera::documents::DocumentsOptions;
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let settings = db.documents_with("settings", DocumentsOptions { deep: true, ..Default::default() })?;
    /// assert_eq!(settings.name(), "settings");
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn documents_with(&self, name: &str, options: DocumentsOptions) -> Result<Documents> {
        crate::store::names::check("documents", name, DOCUMENTS_NAME_LEN_MAX)?;
        let keyspace = self.internal_keyspace(&format!("{DOCUMENTS_KEYSPACE_PREFIX}{name}"))?;
        Ok(Documents { collection: Arc::new(Collection { db: self.clone(), keyspace, name: name.into(), options }) })
    }
}

impl Documents {
    /// A handle on the document `id` (which need not exist yet).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let counter = db.documents("counters")?.document::<std::collections::BTreeMap<String, u64>>("visits");
    /// assert_eq!(counter.get()?, None, "a handle on a document that does not exist yet");
    /// counter.set(&[("home".to_owned(), 1)].into())?;
    /// assert!(counter.exists()?);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn document<T: Serialize + DeserializeOwned>(&self, id: &str) -> Document<T> {
        Document { collection: self.collection.clone(), id: id.into(), prefix: key::encode(id), _type: PhantomData }
    }

    /// Ids of the documents whose id starts with `prefix`, in order.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let docs = db.documents("users")?;
    /// for id in ["user:2", "user:1", "admin:1"] {
    ///     docs.document::<std::collections::BTreeMap<String, u8>>(id).set(&[("n".to_owned(), 1)].into())?;
    /// }
    /// assert_eq!(docs.ids_with_prefix("user:")?, ["user:1", "user:2"]);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn ids_with_prefix(&self, prefix: &str) -> Result<Vec<String>> {
        let raw = key::part_prefix(prefix.as_bytes());
        self.collection.db.read(|tx| collect_ids(tx.prefix(&self.collection.keyspace, &raw)?))
    }

    /// Ids of the documents with `start <= id < end`, in order.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let days = db.documents("days")?;
    /// for id in ["2026-11-23", "2026-11-24", "2026-11-25"] {
    ///     days.document::<std::collections::BTreeMap<String, u8>>(id).set(&[("n".to_owned(), 1)].into())?;
    /// }
    /// assert_eq!(days.ids_in_range("2026-11-24", "2026-11-25")?, ["2026-11-24"]);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn ids_in_range(&self, start: &str, end: &str) -> Result<Vec<String>> {
        let (from, to) = (key::encode(start), key::encode(end));
        self.collection.db.read(|tx| collect_ids(tx.range(&self.collection.keyspace, &from[..]..&to[..])?))
    }

    /// The collection's name.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// assert_eq!(db.documents("profiles")?.name(), "profiles");
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn name(&self) -> &str {
        &self.collection.name
    }
}

fn collect_ids(entries: Entries<'_>) -> Result<Vec<String>> {
    let mut ids: Vec<String> = Vec::new();
    for entry in entries {
        let (stored_key, _) = entry?;
        let (id, _) = key::decode_bytes(stored_key).ok_or_else(|| Error::Corrupted("document key".into()))?;
        let id = String::from_utf8(id).map_err(|_| Error::Corrupted("document id is not UTF-8".into()))?;
        if ids.last() != Some(&id) {
            ids.push(id);
        }
    }
    Ok(ids)
}

/// One document of type `T`. Handles are cheap; two handles to one id are the same document.
///
/// ```
/// #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq, Clone)]
/// struct Profile { name: String, age: u32 }
/// # let dir = tempfile::tempdir().unwrap();
/// let db = tessera::Db::open(dir.path().join("db"))?;
/// let profiles = db.documents("profiles")?;
/// let (one, other) = (profiles.document::<Profile>("ada"), profiles.document::<Profile>("ada"));
/// one.set(&Profile { name: "Ada".into(), age: 36 })?;
/// assert_eq!(other.get()?.map(|p| p.age), Some(36), "two handles on one id are one document");
/// # Ok::<(), tessera::Error>(())
/// ```
pub struct Document<T> {
    pub(crate) collection: Arc<Collection>,
    pub(crate) id: Arc<str>,
    pub(crate) prefix: Vec<u8>,
    _type: PhantomData<fn() -> T>,
}

impl<T> Clone for Document<T> {
    fn clone(&self) -> Self {
        Document { collection: self.collection.clone(), id: self.id.clone(), prefix: self.prefix.clone(), _type: PhantomData }
    }
}

/// One field ready to write ([`Document::update_field`]).
struct FieldWrite {
    /// The field's key.
    key: Vec<u8>,
    /// Its stored bytes, when it is stored under `key` alone.
    bytes: Vec<u8>,
    /// A deep document's nested struct or map: its leaves, keys and stored bytes, written in
    /// place of `key`.
    leaves: Vec<(Vec<u8>, Vec<u8>)>,
    /// What the probe could decide.
    checked: probe::Checked,
}

impl<T> Document<T> {
    /// The key of field `path` (names separated by 0x00 for deep fields).
    /// The key of the field at `path`. Checked here, before anything is written, so that a
    /// `set` whose id and field name are too long for a key fails whole.
    pub(crate) fn field_key(&self, path: &[u8]) -> Result<Vec<u8>> {
        let len = self.prefix.len() + path.len();
        if len > crate::store::KEY_LEN_MAX {
            return Err(Error::DocumentField {
                collection: self.collection.name.to_string(),
                id: self.id.to_string(),
                field: String::from_utf8_lossy(path).replace('\0', "."),
                message: format!(
                    "the field's key would be {len} bytes, over the {} a key may have: shorten the id or the name",
                    crate::store::KEY_LEN_MAX
                ),
            });
        }
        let mut stored_key = Vec::with_capacity(len);
        stored_key.extend_from_slice(&self.prefix);
        stored_key.extend_from_slice(path);
        Ok(stored_key)
    }
}

impl<T: Serialize + DeserializeOwned> Document<T> {
    /// The document's id.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// assert_eq!(db.documents("profiles")?.document::<Vec<u8>>("ada").id(), "ada");
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn id(&self) -> &str {
        &self.id
    }

    fn write<R>(&self, mut write: impl FnMut(&mut WriteTxn<'_>) -> Result<R>) -> Result<R> {
        self.collection.db.write_with(self.collection.options.durability, |tx| write(tx))
    }

    /// The document, or `None` if it has no field stored.
    ///
    /// ```
    /// #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    /// struct Profile { name: String, age: u32 }
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let ada = db.documents("profiles")?.document::<Profile>("ada");
    /// assert_eq!(ada.get()?, None);
    /// ada.set(&Profile { name: "Ada".into(), age: 36 })?;
    /// assert_eq!(ada.get()?, Some(Profile { name: "Ada".into(), age: 36 }));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn get(&self) -> Result<Option<T>> {
        self.collection.db.read(|tx| self.get_in(tx))
    }

    /// [`Document::get`] inside a read transaction.
    ///
    /// ```
    /// #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    /// struct Profile { name: String, age: u32 }
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let profiles = db.documents("profiles")?;
    /// let (ada, bob) = (profiles.document::<Profile>("ada"), profiles.document::<Profile>("bob"));
    /// ada.set(&Profile { name: "Ada".into(), age: 36 })?;
    /// // Both read from one snapshot.
    /// let (a, b) = db.read(|tx| Ok((ada.get_in(tx)?, bob.get_in(tx)?)))?;
    /// assert_eq!((a.map(|p| p.age), b), (Some(36), None));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn get_in(&self, tx: &ReadTxn<'_>) -> Result<Option<T>> {
        fields::decode(self, tx.prefix(&self.collection.keyspace, &self.prefix)?)
    }

    /// [`Document::get`] inside a write transaction (sees its uncommitted writes).
    ///
    /// ```
    /// #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    /// struct Profile { name: String, age: u32 }
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let ada = db.documents("profiles")?.document::<Profile>("ada");
    /// let seen = db.write(|tx| {
    ///     ada.set_in(tx, &Profile { name: "Ada".into(), age: 36 })?;
    ///     ada.get_in_write(tx) // sees the uncommitted write
    /// })?;
    /// assert_eq!(seen.map(|p| p.age), Some(36));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn get_in_write(&self, tx: &WriteTxn<'_>) -> Result<Option<T>> {
        fields::decode(self, tx.prefix(&self.collection.keyspace, &self.prefix)?)
    }

    /// Replaces the document: the old fields go and the new ones arrive in one transaction.
    ///
    /// A value that stores no field at all (an empty map, a struct whose every field is
    /// skipped) is refused with [`Error::DocumentField`] naming the document, and the stored
    /// document is left as it was: a document is its stored fields, and one without any would
    /// read back as absent.
    ///
    /// ```
    /// #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    /// struct Profile { name: String, nickname: Option<String> }
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let ada = db.documents("profiles")?.document::<Profile>("ada");
    /// ada.set(&Profile { name: "Ada".into(), nickname: Some("A".into()) })?;
    /// ada.set(&Profile { name: "Ada".into(), nickname: None })?; // replaces every field
    /// assert_eq!(ada.get()?.unwrap().nickname, None);
    /// let empty = db.documents("tags")?.document::<std::collections::BTreeMap<String, u32>>("none");
    /// assert!(matches!(empty.set(&Default::default()), Err(tessera::Error::DocumentField { .. })));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn set(&self, value: &T) -> Result<()> {
        let encoded = fields::encode(self, value)?;
        self.write(|tx| self.write_fields(tx, &encoded))
    }

    /// [`Document::set`] inside a caller's write transaction.
    ///
    /// ```
    /// #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    /// struct Account { balance: i64 }
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let accounts = db.documents("accounts")?;
    /// let (a, b) = (accounts.document::<Account>("a"), accounts.document::<Account>("b"));
    /// db.write(|tx| {
    ///     a.set_in(tx, &Account { balance: 60 })?;
    ///     b.set_in(tx, &Account { balance: 40 }) // both or neither
    /// })?;
    /// assert_eq!(a.get()?.unwrap().balance + b.get()?.unwrap().balance, 100);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn set_in(&self, tx: &mut WriteTxn<'_>, value: &T) -> Result<()> {
        let encoded = fields::encode(self, value)?;
        self.write_fields(tx, &encoded)
    }

    fn write_fields(&self, tx: &mut WriteTxn<'_>, encoded: &[(Vec<u8>, Vec<u8>)]) -> Result<()> {
        // Remove the stored fields the new value does not have (the others are overwritten):
        // their keys are enough.
        let stale: Vec<Vec<u8>> = tx
            .prefix_keys(&self.collection.keyspace, &self.prefix)?
            .filter_map(|entry| match entry {
                Ok(stored_key) if !encoded.iter().any(|(new_key, _)| new_key.as_slice() == stored_key) => Some(Ok(stored_key.to_vec())),
                Ok(_) => None,
                Err(error) => Some(Err(error)),
            })
            .collect::<Result<_>>()?;
        for stored_key in &stale {
            tx.delete(&self.collection.keyspace, stored_key)?;
        }
        for (field_key, bytes) in encoded {
            tx.put(&self.collection.keyspace, field_key, bytes)?;
        }
        Ok(())
    }

    /// Atomic read-modify-write. Returns the new value, or `None` (nothing written) if the
    /// document does not exist.
    ///
    /// ```
    /// #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    /// struct Counter { hits: u64 }
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let counter = db.documents("counters")?.document::<Counter>("home");
    /// assert_eq!(counter.update(|c| Counter { hits: c.hits + 1 })?, None, "no document: nothing written");
    /// counter.set(&Counter { hits: 1 })?;
    /// assert_eq!(counter.update(|c| Counter { hits: c.hits + 1 })?, Some(Counter { hits: 2 }));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn update(&self, mut change: impl FnMut(T) -> T) -> Result<Option<T>> {
        self.write(|tx| {
            let Some(current) = self.get_in_write(tx)? else { return Ok(None) };
            let updated = change(current);
            let encoded = fields::encode(self, &updated)?;
            self.write_fields(tx, &encoded)?;
            Ok(Some(updated))
        })
    }

    /// Writes one field. `name` is the serde name of the field (for deep documents, a path such
    /// as `address.city`, or the name of a whole nested struct, which replaces its leaves).
    ///
    /// The field must be one of `T`'s ([`Error::UnknownField`] otherwise), the value must
    /// deserialize as its type and leave a document that still decodes as `T`
    /// ([`Error::DocumentField`], naming the document and the field, otherwise), and the
    /// document must exist ([`Error::NotFound`]). Nothing is written when it fails, even inside
    /// a caller's transaction that goes on to commit.
    ///
    /// **Cost.** A field of a plain struct (derived, each struct on the path without
    /// `flatten`) that is stored already is one key read and one key written, with no read of
    /// the other fields: it is checked against `T` alone, field by field (so a `try_from`
    /// that checks fields against each other is not run). Anything else — a flattened struct,
    /// a tagged or untagged enum, a map, a hand-written `Deserialize`, an alias, a field not
    /// stored yet, a deep path through an `Option` that is `None` or a whole nested struct —
    /// reads the document and decodes it as the write would leave it, in the same
    /// transaction, before writing. An alias is refused: the field is stored under the name
    /// `set` stores it under, so write it under that name.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db")).unwrap();
    /// #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    /// struct Profile { name: String, age: u32 }
    /// let ada = db.documents("profiles").unwrap().document::<Profile>("ada");
    /// assert!(matches!(ada.update_field("age", &37), Err(tessera::Error::NotFound { .. })));
    /// ada.set(&Profile { name: "Ada".into(), age: 36 }).unwrap();
    /// ada.update_field("age", &37).unwrap();
    /// assert!(matches!(ada.update_field("agee", &37), Err(tessera::Error::UnknownField { .. })));
    /// assert!(matches!(ada.update_field("age", "old"), Err(tessera::Error::DocumentField { .. })));
    /// assert_eq!(ada.get().unwrap().unwrap().age, 37);
    /// ```
    pub fn update_field<V: Serialize + ?Sized>(&self, name: &str, value: &V) -> Result<()> {
        let write = self.encode_field(name, value)?;
        self.write(|tx| self.put_field(tx, name, &write))
    }

    /// [`Document::update_field`] inside a caller's write transaction. A refused field writes
    /// nothing, so the caller may go on and commit its other writes.
    ///
    /// ```
    /// #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    /// struct Profile { name: String, age: u32 }
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let ada = db.documents("profiles")?.document::<Profile>("ada");
    /// ada.set(&Profile { name: "Ada".into(), age: 36 })?;
    /// db.write(|tx| {
    ///     ada.update_field_in(tx, "age", &37u32)?;
    ///     ada.update_field_in(tx, "name", "Ada L.")
    /// })?;
    /// assert_eq!(ada.get()?, Some(Profile { name: "Ada L.".into(), age: 37 }));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn update_field_in<V: Serialize + ?Sized>(&self, tx: &mut WriteTxn<'_>, name: &str, value: &V) -> Result<()> {
        let write = self.encode_field(name, value)?;
        self.put_field(tx, name, &write)
    }

    /// [`Error::UnknownField`] if `T` has no field `name` (a dotted path in a deep document),
    /// as a write of it is refused: a read or an observer of a misspelt name would otherwise
    /// answer `None` for good, which cannot be told from an absent field.
    fn check_field_name(&self, name: &str) -> Result<()> {
        let deep = self.collection.options.deep;
        fields::path_of(name, deep)?;
        let names: Vec<&str> = if deep { name.split('.').collect() } else { vec![name] };
        let null = tessera_value::to_vec(&())?;
        let null = tessera_value::Doc::from_trusted(&null)?;
        match probe::check_field::<T>(&names, null.root()) {
            Err(probe::Probe::UnknownField { at }) => {
                Err(Error::UnknownField { collection: format!("{}/{}", self.collection.name, self.id), path: at })
            }
            _ => Ok(()),
        }
    }

    /// The field's key and stored bytes, once the probe has found nothing wrong with them.
    fn encode_field<V: Serialize + ?Sized>(&self, name: &str, value: &V) -> Result<FieldWrite> {
        let deep = self.collection.options.deep;
        let path = fields::path_of(name, deep)?;
        let plain = tessera_value::to_vec(value)?;
        // No vector for a plain field's one name.
        let single = [name];
        let split: Vec<&str>;
        let names: &[&str] = if deep {
            split = name.split('.').collect();
            &split
        } else {
            &single
        };
        let written = tessera_value::Doc::from_trusted(&plain)?;
        let checked = match probe::check_field::<T>(names, written.root()) {
            Ok(checked) => checked,
            Err(probe::Probe::UnknownField { at }) => {
                return Err(Error::UnknownField { collection: format!("{}/{}", self.collection.name, self.id), path: at });
            }
            Err(probe::Probe::WrongType(message)) => {
                return Err(self.field_refused(name, format!("the value does not fit the field: {message}")));
            }
        };
        let key = self.field_key(&path)?;
        if deep && written.root().as_dict().is_some_and(|dict| !dict.is_empty()) {
            // A nested struct or map: stored as its leaves, as `set` stores it.
            let mut leaves = Vec::new();
            fields::expand_deep(self, path.into_owned(), plain, &mut leaves)?;
            return Ok(FieldWrite { key, bytes: Vec::new(), leaves, checked });
        }
        let bytes = fields::transform_out(self, name, plain);
        Ok(FieldWrite { key, bytes, leaves: Vec::new(), checked })
    }

    fn field_refused(&self, field: &str, message: String) -> Error {
        Error::DocumentField { collection: self.collection.name.to_string(), id: self.id.to_string(), field: field.to_owned(), message }
    }

    /// Writes one field of an existing document.
    ///
    /// The fast path, one look for the key (no value read) and one put: the probe decided ([`probe::Checked::Conclusive`])
    /// and the field is stored already under this very key (so the name is the one `set`
    /// writes, not an alias, and in a deep document no value on the path is stored as a leaf
    /// in its way). Otherwise the document as the write would leave it is decoded as `T`
    /// first, and nothing is written unless it decodes and holds the field under this name.
    fn put_field(&self, tx: &mut WriteTxn<'_>, name: &str, write: &FieldWrite) -> Result<()> {
        let keyspace = &self.collection.keyspace;
        if write.checked == probe::Checked::Conclusive && write.leaves.is_empty() && tx.has_key(keyspace, &write.key)? {
            return tx.put(keyspace, &write.key, &write.bytes);
        }
        if !tx.has_prefix(keyspace, &self.prefix)? {
            return Err(Error::NotFound { collection: self.collection.name.to_string(), key: self.id.to_string() });
        }
        // What the write replaces: in a deep document the field's whole subtree, and a value
        // stored whole on its path: a leaf where the path needs a dict (an `Option` that is
        // `None`, an empty map) goes, and a nested value a plain handle stored whole is spread
        // into leaves first, so that its other entries stay (they were dropped with it).
        let mut deletes: Vec<Vec<u8>> = Vec::new();
        let mut kept: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        if self.collection.options.deep {
            let mut under = write.key.clone();
            under.push(PATH_SEPARATOR);
            for entry in tx.prefix_keys(keyspace, &under)? {
                deletes.push(entry?.to_vec());
            }
            let writes_own_key = write.leaves.is_empty() || write.leaves.iter().any(|(key, _)| *key == write.key);
            if !writes_own_key && tx.has_key(keyspace, &write.key)? {
                deletes.push(write.key.clone());
            }
            for ancestor in fields::ancestor_keys(&write.key, self.prefix.len()) {
                if let Some(stored) = tx.get(keyspace, ancestor)? {
                    kept.extend(fields::spread_ancestor(self, ancestor, stored, &write.key)?);
                    deletes.push(ancestor.to_vec());
                }
            }
        }
        let mut puts: Vec<(&[u8], &[u8])> = if write.leaves.is_empty() {
            vec![(&write.key[..], &write.bytes[..])]
        } else {
            write.leaves.iter().map(|(key, bytes)| (&key[..], &bytes[..])).collect()
        };
        // The write's own puts come first: only they must be held by `T` under their names
        // (what is kept of a spread ancestor may hold entries `T` ignores, as it did stored whole).
        let written = puts.len();
        puts.extend(kept.iter().map(|(key, bytes)| (&key[..], &bytes[..])));
        self.verify_field(tx, name, write.checked, &puts, written, &deletes)?;
        for stored_key in &deletes {
            tx.delete(keyspace, stored_key)?;
        }
        for (field_key, bytes) in &puts {
            tx.put(keyspace, field_key, bytes)?;
        }
        Ok(())
    }

    /// Decodes the document as `puts` and `deletes` would leave it: an error naming the field
    /// if it would no longer decode as `T`, or if `T` would not hold the written value under
    /// the written name (a name `T` ignores, or an alias that `set` would store under another
    /// name). The first `written` puts are the write's own; the others keep what a spread
    /// ancestor held, which `T` need not hold.
    fn verify_field(
        &self,
        tx: &WriteTxn<'_>,
        name: &str,
        checked: probe::Checked,
        puts: &[(&[u8], &[u8])],
        written: usize,
        deletes: &[Vec<u8>],
    ) -> Result<()> {
        let mut before: std::collections::BTreeMap<Vec<u8>, Vec<u8>> = std::collections::BTreeMap::new();
        for entry in tx.prefix(&self.collection.keyspace, &self.prefix)? {
            let (stored_key, bytes) = entry?;
            before.insert(stored_key.to_vec(), bytes.to_vec());
        }
        let mut after = before.clone();
        for stored_key in deletes {
            after.remove(stored_key);
        }
        for (field_key, bytes) in puts {
            after.insert(field_key.to_vec(), bytes.to_vec());
        }
        let decode = |fields: &std::collections::BTreeMap<Vec<u8>, Vec<u8>>| {
            fields::decode(self, fields.iter().map(|(k, v)| Ok((k.as_slice(), v.as_slice()))))
        };
        let value = match decode(&after) {
            Ok(Some(value)) => value,
            Ok(None) => return Err(Error::NotFound { collection: self.collection.name.to_string(), key: self.id.to_string() }),
            Err(error) => {
                let reason = match error {
                    Error::DocumentField { field, message, .. } if field.is_empty() || field == name => message,
                    Error::DocumentField { field, message, .. } => format!("field `{field}`: {message}"),
                    other => other.to_string(),
                };
                let top = name.split('.').next().unwrap_or_default();
                if reason.starts_with(&format!("unknown field `{top}`")) {
                    return Err(self.unknown_field(name));
                }
                return Err(self.field_refused(name, format!("not written: the document would no longer decode as its type: {reason}")));
            }
        };
        // Does `T` hold the written value under the written name? `set` of the decoded value
        // would store exactly the keys `T` keeps.
        let kept = fields::encode(self, &value)?;
        if puts[..written].iter().all(|(field_key, _)| kept.iter().any(|(kept_key, _)| kept_key == field_key)) {
            return Ok(());
        }
        let unchanged = match decode(&before) {
            Ok(Some(previous)) => fields::encode(self, &previous).is_ok_and(|previous| previous == kept),
            _ => false,
        };
        match (unchanged, checked) {
            // A declared field whose value `T` does not store (`None` under
            // `skip_serializing_if`) where it held that value already: nothing changes.
            (true, probe::Checked::Conclusive) => Ok(()),
            // Taken by nothing: a name `T` ignores.
            (true, probe::Checked::Inconclusive) => Err(self.unknown_field(name)),
            (false, _) => Err(self.field_refused(
                name,
                "not written: the type reads this name but stores the field under another (an alias?): write it under the name `set` stores"
                    .into(),
            )),
        }
    }

    fn unknown_field(&self, name: &str) -> Error {
        Error::UnknownField { collection: format!("{}/{}", self.collection.name, self.id), path: name.to_owned() }
    }

    /// A handle on one field, with `get` and `set`.
    ///
    /// ```
    /// #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    /// struct Profile { name: String, age: u32 }
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let ada = db.documents("profiles")?.document::<Profile>("ada");
    /// ada.set(&Profile { name: "Ada".into(), age: 36 })?;
    /// let age = ada.field::<u32>("age");
    /// age.set(&37)?;
    /// assert_eq!(age.get()?, Some(37));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn field<V: Serialize + DeserializeOwned>(&self, name: &str) -> FieldHandle<T, V> {
        FieldHandle {
            document: self.clone(),
            name: name.into(),
            name_checked: std::sync::atomic::AtomicBool::new(false),
            _type: PhantomData,
        }
    }

    /// Removes the document; returns whether it existed.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let doc = db.documents("notes")?.document::<std::collections::BTreeMap<String, String>>("n1");
    /// doc.set(&[("text".to_owned(), "hi".to_owned())].into())?;
    /// assert!(doc.delete()?);
    /// assert!(!doc.delete()?, "already gone");
    /// assert_eq!(doc.get()?, None);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn delete(&self) -> Result<bool> {
        self.write(|tx| self.delete_in(tx))
    }

    /// [`Document::delete`] inside a caller's write transaction.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let notes = db.documents("notes")?;
    /// type Note = std::collections::BTreeMap<String, u8>;
    /// let (a, b) = (notes.document::<Note>("a"), notes.document::<Note>("b"));
    /// a.set(&[("n".to_owned(), 1)].into())?;
    /// let deleted = db.write(|tx| Ok((a.delete_in(tx)?, b.delete_in(tx)?)))?;
    /// assert_eq!(deleted, (true, false));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn delete_in(&self, tx: &mut WriteTxn<'_>) -> Result<bool> {
        let keys: Vec<Vec<u8>> =
            tx.prefix_keys(&self.collection.keyspace, &self.prefix)?.map(|entry| entry.map(<[u8]>::to_vec)).collect::<Result<_>>()?;
        for stored_key in &keys {
            tx.delete(&self.collection.keyspace, stored_key)?;
        }
        Ok(!keys.is_empty())
    }

    /// True if the document has at least one field stored.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let doc = db.documents("notes")?.document::<std::collections::BTreeMap<String, u8>>("n1");
    /// assert!(!doc.exists()?);
    /// doc.set(&[("n".to_owned(), 1)].into())?;
    /// assert!(doc.exists()?);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn exists(&self) -> Result<bool> {
        self.collection.db.read(|tx| Ok(tx.prefix(&self.collection.keyspace, &self.prefix)?.next().transpose()?.is_some()))
    }

    /// Subscribes to the document's value: [`crate::live::Event::Initial`] with its value now,
    /// then `Changed` with its value after each commit that touches it (one event per commit,
    /// not one per field; `None` once deleted), then `Closed` when the database closes. A
    /// stored field that no longer decodes ends the subscription with the error
    /// ([`crate::live::SubscriptionEnd::Failed`]).
    ///
    /// ```
    /// use tessera::live::Event;
    /// use std::time::Duration;
    /// #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    /// struct Profile { name: String, age: u32 }
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let ada = db.documents("profiles")?.document::<Profile>("ada");
    /// let live = ada.observe()?;
    /// assert!(matches!(live.recv_timeout(Duration::from_secs(5)), Some(Event::Initial(None))));
    /// ada.set(&Profile { name: "Ada".into(), age: 36 })?;
    /// let change = live.recv_timeout(Duration::from_secs(5)).and_then(Event::changed);
    /// assert_eq!(change, Some(Some(Profile { name: "Ada".into(), age: 36 })));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn observe(&self) -> Result<ValueSubscription<T>>
    where
        T: Send + 'static,
    {
        observe::document(self)
    }

    /// Subscribes to one field's value: `Initial` with its value now, then `Changed` only when
    /// its stored bytes change (`None` once removed), then `Closed`.
    ///
    /// ```
    /// use tessera::live::Event;
    /// use std::time::Duration;
    /// #[derive(serde::Serialize, serde::Deserialize)]
    /// struct Profile { name: String, age: u32 }
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let ada = db.documents("profiles")?.document::<Profile>("ada");
    /// ada.set(&Profile { name: "Ada".into(), age: 36 })?;
    /// let ages = ada.observe_field::<u32>("age")?;
    /// assert!(matches!(ages.recv_timeout(Duration::from_secs(5)), Some(Event::Initial(Some(36)))));
    /// ada.update_field("name", &"Ada L.")?; // not the observed field: no event
    /// ada.update_field("age", &37u32)?;
    /// assert!(matches!(ages.recv_timeout(Duration::from_secs(5)), Some(Event::Changed(Some(37)))));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn observe_field<V: DeserializeOwned + Send + 'static>(&self, name: &str) -> Result<ValueSubscription<V>> {
        self.check_field_name(name)?;
        observe::field(self, name)
    }
}

/// A handle on one field of a document: the counterpart of a Kotlin property delegate. (Not
/// to be confused with [`crate::query::Field`], a record field in a typed query.)
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = tessera::Db::open(dir.path().join("db")).unwrap();
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct Profile { name: String, age: u32 }
/// let ada = db.documents("profiles").unwrap().document::<Profile>("ada");
/// ada.set(&Profile { name: "Ada".into(), age: 36 }).unwrap();
/// let age: tessera::FieldHandle<Profile, u32> = ada.field("age");
/// age.set(&37).unwrap();
/// assert_eq!(age.get().unwrap(), Some(37));
/// ```
pub struct FieldHandle<T, V> {
    document: Document<T>,
    name: Arc<str>,
    /// `T` was found to have the field (checked at the first read).
    name_checked: std::sync::atomic::AtomicBool,
    _type: PhantomData<fn() -> V>,
}

impl<T: Serialize + DeserializeOwned, V: Serialize + DeserializeOwned> FieldHandle<T, V> {
    /// The field's value, or `None` if it is not stored. In a deep document a nested struct
    /// is read from its leaves, as [`Document::get`] reads it.
    ///
    /// ```
    /// #[derive(serde::Serialize, serde::Deserialize)]
    /// struct Profile { name: String, age: Option<u32> }
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let ada = db.documents("profiles")?.document::<Profile>("ada");
    /// ada.set(&Profile { name: "Ada".into(), age: None })?;
    /// assert_eq!(ada.field::<String>("name").get()?, Some("Ada".to_owned()));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn get(&self) -> Result<Option<V>> {
        if !self.name_checked.load(std::sync::atomic::Ordering::Relaxed) {
            self.document.check_field_name(&self.name)?;
            self.name_checked.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        let deep = self.document.collection.options.deep;
        let path = fields::path_of(&self.name, deep)?;
        let field_key = self.document.field_key(&path)?;
        let keyspace = &self.document.collection.keyspace;
        self.document.collection.db.read(|tx| {
            if !deep {
                return match tx.get(keyspace, &field_key)? {
                    Some(bytes) => fields::decode_field(&self.document, &self.name, bytes).map(Some),
                    None => {
                        // Absent, unless a deep handle stored it as leaves (a plain name holds
                        // no NUL, so no plain field's key starts with this key and a NUL).
                        let mut under = field_key.clone();
                        under.push(PATH_SEPARATOR);
                        match tx.prefix(keyspace, &under)?.next().transpose()? {
                            None => Ok(None),
                            Some(_) => Err(self.document.field_refused(&self.name, fields::STORED_DEEP.into())),
                        }
                    }
                };
            }
            // Deep: the field is its key and every key under it (a nested struct's leaves), or
            // is held inside a value stored whole at one of its ancestors (a plain handle's).
            let mut ancestors = Vec::new();
            for ancestor in fields::ancestor_keys(&field_key, self.document.prefix.len()) {
                if let Some(bytes) = tx.get(keyspace, ancestor)? {
                    ancestors.push(Ok((ancestor, bytes)));
                }
            }
            let own = tx.get(keyspace, &field_key)?.map(|bytes| Ok((&field_key[..], bytes)));
            let mut under = field_key.clone();
            under.push(PATH_SEPARATOR);
            let entries = ancestors.into_iter().chain(own).chain(tx.prefix(keyspace, &under)?);
            fields::decode_deep_field(&self.document, &self.name, &path, &field_key, entries)
        })
    }

    /// Writes the field, as [`Document::update_field`] does (for a stored field of a plain
    /// struct: one key, no read of the others).
    ///
    /// ```
    /// #[derive(serde::Serialize, serde::Deserialize)]
    /// struct Profile { name: String, age: u32 }
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let ada = db.documents("profiles")?.document::<Profile>("ada");
    /// ada.set(&Profile { name: "Ada".into(), age: 36 })?;
    /// ada.field::<u32>("age").set(&37)?;
    /// assert_eq!(ada.get()?.unwrap().age, 37);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn set(&self, value: &V) -> Result<()> {
        self.document.update_field(&self.name, value)
    }
}
