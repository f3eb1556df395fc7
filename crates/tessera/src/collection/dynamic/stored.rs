//! Reads that hand the stored record to a caller's function instead of copying it into a
//! standalone [`DynRecord`](super::DynRecord): for a binding that turns the record into its
//! own objects (the Python package builds dataclasses) and has no use for the copy.

use super::{DynCollection, DynQuery};
use crate::error::Result;
use crate::store::ReadSource;
use tessera_value::Value;

impl DynCollection {
    /// Calls `read` with the record at `key` (as for [`DynCollection::get`]), as stored: its
    /// field names resolve through the collection's shared keys, and nothing is copied. The
    /// record is checked as `get` checks it (a damaged one, or one whose key fields are not
    /// `key`, is an error naming the collection and key). `None` when there is no record at `key`.
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(serde::Serialize, serde::Deserialize, Record)]
    /// # #[record(name = "tags")]
    /// # struct Tag { #[record(key)] name: String, uses: u32 }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let typed = db.collection::<Tag>()?;
    /// # db.write(|tx| typed.insert(tx, &Tag { name: "rust".into(), uses: 3 }))?;
    /// let tags = db.dyn_collection("tags")?;
    /// let key = tessera::value::from_json(br#""rust""#).unwrap();
    /// let key = tessera::value::Doc::from_untrusted(&key)?.root();
    /// let uses = tags.get_with(&db, key, |record| record.get("uses").and_then(|uses| uses.as_i64()))?;
    /// assert_eq!(uses, Some(Some(3)));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn get_with<R>(&self, source: &impl ReadSource, key: Value<'_>, read: impl FnOnce(Value<'_>) -> R) -> Result<Option<R>> {
        let Some(key) = self.encode_key(key)? else { return Ok(None) };
        source.with_snapshot(|snapshot| {
            self.state.readable_in(snapshot)?;
            match snapshot.get_value(&self.state.records, &key)? {
                Some(bytes) => Ok(Some(read(super::open_checked(&self.state, &key, bytes)?.root()))),
                None => Ok(None),
            }
        })
    }

    /// [`DynCollection::get_with`] by the stored key's encoding (as [`DynCollection::stored_key`]
    /// or [`DynRecord::key_bytes`](super::DynRecord::key_bytes) give it), for a caller that
    /// encoded the key once. Bytes that are no stored key find nothing.
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(serde::Serialize, serde::Deserialize, Record)]
    /// # #[record(name = "tags")]
    /// # struct Tag { #[record(key)] name: String, uses: u32 }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let typed = db.collection::<Tag>()?;
    /// # db.write(|tx| typed.insert(tx, &Tag { name: "rust".into(), uses: 3 }))?;
    /// let tags = db.dyn_collection("tags")?;
    /// let key = tessera::store::key::encode("rust");
    /// let uses = tags.get_stored_with(&db, &key, |record| record.get("uses").and_then(|uses| uses.as_i64()))?;
    /// assert_eq!(uses, Some(Some(3)));
    /// assert_eq!(tags.get_stored_with(&db, b"", |_| ())?, None);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn get_stored_with<R>(&self, source: &impl ReadSource, key: &[u8], read: impl FnOnce(Value<'_>) -> R) -> Result<Option<R>> {
        if !super::stored_key_size(key) {
            return Ok(None);
        }
        source.with_snapshot(|snapshot| {
            self.state.readable_in(snapshot)?;
            match snapshot.get_value(&self.state.records, key)? {
                Some(bytes) => Ok(Some(read(super::open_checked(&self.state, key, bytes)?.root()))),
                None => Ok(None),
            }
        })
    }

    /// Calls `read` with a record of this collection given as its key and stored bytes (from
    /// [`DynQuery::fetch_stored`]), opened as a read opens it: checked (a damaged record is an
    /// error naming the collection and key), names resolved through the shared keys, nothing
    /// copied.
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(serde::Serialize, serde::Deserialize, Record)]
    /// # #[record(name = "tags")]
    /// # struct Tag { #[record(key)] name: String, uses: u32 }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let typed = db.collection::<Tag>()?;
    /// # db.write(|tx| typed.insert(tx, &Tag { name: "go".into(), uses: 5 }))?;
    /// let tags = db.dyn_collection("tags")?;
    /// let found = tags.filter_text("uses > 1")?.fetch_stored(&db)?;
    /// let (key, stored) = &found[0];
    /// assert_eq!(tags.read_stored(key, stored, |record| record.to_json())?, r#"{"name":"go","uses":5}"#);
    /// assert!(tags.read_stored(key, &stored[1..], |_| ()).is_err());
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn read_stored<R>(&self, key: &[u8], stored: &[u8], read: impl FnOnce(Value<'_>) -> R) -> Result<R> {
        Ok(read(super::open_checked(&self.state, key, stored)?.root()))
    }
}

impl DynQuery {
    /// The matching records as (key, stored bytes) pairs, copied from one snapshot as they are
    /// stored (no re-encoding): read each with [`DynCollection::read_stored`].
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(serde::Serialize, serde::Deserialize, Record)]
    /// # #[record(name = "tags")]
    /// # struct Tag { #[record(key)] name: String, uses: u32 }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let typed = db.collection::<Tag>()?;
    /// # db.write(|tx| { for (name, uses) in [("a", 1), ("b", 5)] { typed.insert(tx, &Tag { name: name.into(), uses })?; } Ok(()) })?;
    /// let tags = db.dyn_collection("tags")?;
    /// assert_eq!(tags.filter_text("uses > 1")?.fetch_stored(&db)?.len(), 1);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn fetch_stored(&self, source: &impl ReadSource) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        source.with_snapshot(|snapshot| {
            let mut records = Vec::new();
            self.run(snapshot, |key, stored| {
                records.push((key.to_vec(), stored.to_vec()));
                Ok(true)
            })?;
            Ok(records)
        })
    }
}
