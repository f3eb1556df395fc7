//! Live subscriptions on a dynamic collection: a query ([`DynQuery::subscribe`]) or the
//! record at a key ([`DynCollection::subscribe_object`]), kept by the incremental engine
//! typed subscriptions use (`crate::live`), with records delivered as [`DynRecord`]s.

use super::{DynCollection, DynQuery, DynRecord, DynSchema};
use crate::collection::key_layout::KeyLayout;
use crate::collection::{CollectionState, QueryParts};
use crate::error::Result;
use crate::live::{LiveRecord, ObjectSubscription, Policy, QuerySubscription};
use std::sync::Arc;
use tessera_value::Value;

/// A dynamic record is kept as stored, with the collection's shared keys; the key layout
/// comes from the stored schema (its key fields and kinds).
impl LiveRecord for DynRecord {
    type Keys = Arc<DynSchema>;

    fn decode_stored(state: &CollectionState, key: &[u8], bytes: &[u8]) -> Result<DynRecord> {
        DynRecord::read(state, key, bytes)
    }

    fn sole_key_field(schema: &Arc<DynSchema>) -> Option<&str> {
        match schema.key_fields.as_slice() {
            [field] => Some(field),
            _ => None,
        }
    }

    fn with_layout<R>(schema: &Arc<DynSchema>, run: impl FnOnce(&dyn KeyLayout) -> R) -> R {
        run(&super::query::query_layout(schema))
    }
}

impl DynQuery {
    /// Subscribes to the query, with the shape of every subscription
    /// ([`crate::live::Subscription`]): [`crate::live::Event::Initial`] with the result now,
    /// then `Changed` with a [`crate::live::ResultChange`] per commit that changes the result,
    /// then `Closed` when the database closes.
    ///
    /// The query is kept as a typed one is: each commit's changed records are matched
    /// against it and merged into the result, never by running the query again.
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(serde::Serialize, serde::Deserialize, Record)]
    /// # #[record(name = "tags")]
    /// # struct Tag { #[record(key)] name: String, uses: u32 }
    /// use tessera::live::Event;
    /// use std::time::Duration;
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # db.collection::<Tag>()?;
    /// let tags = db.dyn_collection("tags")?;
    /// let live = tags.filter_text("uses > 2")?.subscribe()?;
    /// assert!(live.recv_timeout(Duration::from_secs(5)).and_then(Event::initial).unwrap().is_empty());
    /// db.write(|tx| tags.insert_json(tx, br#"{"name": "go", "uses": 5}"#))?;
    /// let change = live.recv_timeout(Duration::from_secs(5)).and_then(Event::changed).unwrap();
    /// assert_eq!((change.insertions.as_slice(), change.result[0].to_json().as_str()), (&[0][..], r#"{"name":"go","uses":5}"#));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn subscribe(&self) -> Result<QuerySubscription<DynRecord>> {
        self.subscribe_with(Policy::EveryChange)
    }

    /// [`DynQuery::subscribe`] with a delivery policy.
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(serde::Serialize, serde::Deserialize, Record)]
    /// # #[record(name = "tags")]
    /// # struct Tag { #[record(key)] name: String, uses: u32 }
    /// use tessera::live::{Event, Policy};
    /// use std::time::Duration;
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # db.collection::<Tag>()?;
    /// let tags = db.dyn_collection("tags")?;
    /// // A slow reader gets unread changes merged into one, never a backlog.
    /// let live = tags.all().subscribe_with(Policy::LatestOnly)?;
    /// assert!(live.recv_timeout(Duration::from_secs(5)).and_then(Event::initial).unwrap().is_empty());
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn subscribe_with(&self, policy: Policy) -> Result<QuerySubscription<DynRecord>> {
        self.explain()?; // type-checks, as a typed subscription does
        let collection = &self.collection;
        let parts = QueryParts { predicate: self.predicate.clone(), orders: self.orders.clone(), offset: self.offset, limit: self.limit };
        crate::live::subscribe_query_parts::<DynRecord>(&collection.db, &collection.state, collection.schema.clone(), parts, policy)
    }
}

impl DynCollection {
    /// Subscribes to the record at `key` (the key field's value; an array of the values for a
    /// composite key): [`crate::live::Event::Initial`] with the record now (`None`: absent),
    /// then [`crate::live::ObjectChange::Updated`] after every commit that writes it and
    /// [`crate::live::ObjectChange::Deleted`] when it is removed, then `Closed` when the
    /// database closes. A key of the wrong type is a [`crate::Error::SchemaViolation`]; so is
    /// any key while the key fields' widths are unknown (an empty collection of an old
    /// schema).
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(serde::Serialize, serde::Deserialize, Record)]
    /// # #[record(name = "tags")]
    /// # struct Tag { #[record(key)] name: String, uses: u32 }
    /// use tessera::live::{Event, ObjectChange};
    /// use tessera::value::{from_json, Doc};
    /// use std::time::Duration;
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # db.collection::<Tag>()?;
    /// let tags = db.dyn_collection("tags")?;
    /// let key = from_json(br#""go""#).unwrap();
    /// let live = tags.subscribe_object(Doc::from_untrusted(&key)?.root())?;
    /// assert!(matches!(live.recv_timeout(Duration::from_secs(5)), Some(Event::Initial(None))));
    /// db.write(|tx| tags.insert_json(tx, br#"{"name": "go", "uses": 5}"#))?;
    /// let change = live.recv_timeout(Duration::from_secs(5)).and_then(Event::changed).unwrap();
    /// assert!(matches!(change, ObjectChange::Updated(record) if record.to_json() == r#"{"name":"go","uses":5}"#));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn subscribe_object(&self, key: Value<'_>) -> Result<ObjectSubscription<DynRecord>> {
        self.subscribe_object_with(key, Policy::EveryChange)
    }

    /// [`DynCollection::subscribe_object`] with a delivery policy.
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(serde::Serialize, serde::Deserialize, Record)]
    /// # #[record(name = "tags")]
    /// # struct Tag { #[record(key)] name: String }
    /// use tessera::live::{Event, Policy};
    /// use std::time::Duration;
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # db.collection::<Tag>()?;
    /// let tags = db.dyn_collection("tags")?;
    /// let key = tessera::value::from_json(br#""go""#).unwrap();
    /// let live = tags.subscribe_object_with(tessera::value::Doc::from_untrusted(&key)?.root(), Policy::LatestOnly)?;
    /// assert!(matches!(live.recv_timeout(Duration::from_secs(5)), Some(Event::Initial(None))));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn subscribe_object_with(&self, key: Value<'_>, policy: Policy) -> Result<ObjectSubscription<DynRecord>> {
        let key = self.encode_key(key)?.ok_or_else(|| self.unknown_key_kinds())?;
        crate::live::subscribe_object_at::<DynRecord>(&self.db, &self.state, self.schema.clone(), key, policy)
    }
}
