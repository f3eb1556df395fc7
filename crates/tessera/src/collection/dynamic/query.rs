//! Queries on a dynamic collection ([`DynQuery`]): built from a predicate or the text syntax,
//! planned and run by the engine typed queries use, with the collection's key layout read
//! from its stored key kinds.

use super::{DynCollection, DynRecord, DynSchema, KeyKind};
use crate::collection::engine::QuerySpec;
use crate::collection::key_layout::KindsKey;
use crate::collection::plan::Plan;
use crate::error::Result;
use crate::query::{Expr, OrderKey, QueryError, Statement};
use crate::store::{ReadSource, Snapshot};
use std::sync::Arc;

impl DynCollection {
    /// Every record, in primary-key order, as a query to refine.
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(serde::Serialize, serde::Deserialize, Record)]
    /// # #[record(name = "tags")]
    /// # struct Tag { #[record(key)] name: String }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # db.collection::<Tag>()?;
    /// assert_eq!(db.dyn_collection("tags")?.all().count(&db)?, 0);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn all(&self) -> DynQuery {
        DynQuery { collection: self.clone(), predicate: None, orders: Vec::new(), offset: 0, limit: None }
    }

    /// The records matching `predicate` (built with [`crate::query::field`]); a typed error
    /// if it does not type-check against the stored shape.
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(serde::Serialize, serde::Deserialize, Record)]
    /// # #[record(name = "tags")]
    /// # struct Tag { #[record(key)] name: String, uses: u32 }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let tags = db.collection::<Tag>()?;
    /// # db.write(|tx| tags.insert(tx, &Tag { name: "rust".into(), uses: 9 }))?;
    /// use tessera::query::field;
    /// let tags = db.dyn_collection("tags")?;
    /// assert_eq!(tags.filter(field("uses").gt(5))?.count(&db)?, 1);
    /// assert!(tags.filter(field("uses").gt("x")).is_err());
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn filter(&self, predicate: Expr) -> Result<DynQuery> {
        crate::query::check_query_depth(&predicate, &self.state.name)?;
        self.state.shape.check_predicate(&predicate)?;
        Ok(DynQuery { collection: self.clone(), predicate: Some(Arc::new(predicate)), orders: Vec::new(), offset: 0, limit: None })
    }

    /// `text` parsed as a whole query (see [`DynCollection::filter_text`]), not yet
    /// type-checked: an operand `true`, `false` or `null` spelt as one of this collection's
    /// fields is named is an error at its column, since the text syntax cannot name that field.
    ///
    /// ```
    /// use tessera::collection::{DynSchema, KeyKind, TypeDesc};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let shape = TypeDesc::Struct(vec![("id".into(), TypeDesc::Int), ("null".into(), TypeDesc::Int)]);
    /// let schema = DynSchema { version: 1, key_fields: vec!["id".into()], key_kinds: vec![KeyKind::U32], shape, indexes: vec![] };
    /// let flags = db.create_dyn_collection("flags", &schema)?;
    /// assert_eq!(flags.parse_text("id == 1 limit 2")?.limit, Some(2));
    /// assert!(flags.parse_text("null == 5").is_err(), "the field, or the value?");
    /// assert!(flags.parse_text("id is not null").is_ok());
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn parse_text(&self, text: &str) -> Result<Statement> {
        self.state.parse_statement(text)
    }

    /// A whole query from the text syntax: `[PREDICATE] [order by FIELD [asc|desc] [nulls
    /// first|last], …] [limit N] [offset M]` (see `docs/query.md`), as
    /// [`crate::Collection::query_text`] reads it.
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(serde::Serialize, serde::Deserialize, Record)]
    /// # #[record(name = "tags")]
    /// # struct Tag { #[record(key)] name: String, uses: u32 }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # db.collection::<Tag>()?;
    /// let tags = db.dyn_collection("tags")?;
    /// assert!(tags.filter_text("uses >= 2").is_ok());
    /// assert!(tags.filter_text("uses >= 2 ORDER BY uses DESC LIMIT 3").is_ok());
    /// assert!(tags.filter_text("uses >=").is_err());
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn filter_text(&self, text: &str) -> Result<DynQuery> {
        let statement = self.parse_text(text)?;
        let mut query = match statement.predicate {
            Some(predicate) => self.filter(predicate)?,
            None => self.all(),
        };
        for key in statement.order_by {
            query = query.order_by_key(key)?;
        }
        query.offset = statement.offset;
        query.limit = statement.limit;
        Ok(query)
    }
}

/// The key layout a query on a collection of `schema` plans with: none for a key of one float
/// field, whose key order (`f64::total_cmp`: `-0.0` below `0.0`) is not the query language's
/// (the two are equal, ties then go by primary key ascending), so that an order by the key is
/// sorted in memory rather than read from the keys walked backwards. Such a key has no key
/// lookups or ranges to lose: a query constant never encodes as a float key part.
pub(super) fn query_layout(schema: &DynSchema) -> KindsKey<'_> {
    if matches!(schema.key_kinds.as_slice(), [KeyKind::F32 | KeyKind::F64]) {
        return KindsKey::new(&[], &[]);
    }
    KindsKey::new(&schema.key_fields, &schema.key_kinds)
}

/// A query on a dynamic collection: a predicate, an order, an offset and a limit, planned and
/// run as a typed query is: primary-key lookups and ranges, index ranges, index walks for an
/// order, and a scan (with an in-memory sort) where nothing else applies.
///
/// ```
/// # use tessera::collection::Record;
/// # #[derive(serde::Serialize, serde::Deserialize, Record)]
/// # #[record(name = "tags")]
/// # struct Tag { #[record(key)] name: String, uses: u32 }
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = tessera::Db::open(dir.path().join("db"))?;
/// # let tags = db.collection::<Tag>()?;
/// # db.write(|tx| { for (name, uses) in [("a", 1), ("b", 5), ("c", 9)] { tags.insert(tx, &Tag { name: name.into(), uses })?; } Ok(()) })?;
/// let tags = db.dyn_collection("tags")?;
/// let query = tags.filter_text("uses > 2")?.limit(1);
/// assert_eq!(query.fetch(&db)?[0].to_json(), r#"{"name":"b","uses":5}"#);
/// assert_eq!(query.explain()?.to_string(), "full scan, filter uses > 2");
/// # Ok::<(), tessera::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct DynQuery {
    pub(super) collection: DynCollection,
    pub(super) predicate: Option<Arc<Expr>>,
    /// Order keys, most significant first (ties in primary-key order).
    pub(super) orders: Vec<OrderKey>,
    pub(super) offset: usize,
    pub(super) limit: Option<usize>,
}

impl DynQuery {
    /// Orders by one more key, with NULLs as the key says (SQL's rule by default: last
    /// ascending, first descending); a typed error for a field that has no order or past
    /// [`crate::query::ORDER_KEYS_MAX`] keys.
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(serde::Serialize, serde::Deserialize, Record)]
    /// # #[record(name = "tags")]
    /// # struct Tag { #[record(key)] name: String, uses: Option<u32> }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let typed = db.collection::<Tag>()?;
    /// # db.write(|tx| { for (name, uses) in [("a", Some(1)), ("b", None), ("c", Some(9))] { typed.insert(tx, &Tag { name: name.into(), uses })?; } Ok(()) })?;
    /// use tessera::query::{Order, OrderKey};
    /// let tags = db.dyn_collection("tags")?;
    /// let names: Vec<String> = tags.all().order_by_key(OrderKey::new("uses", Order::Desc))?.fetch(&db)?.iter().map(|r| r.to_json()).collect();
    /// assert_eq!(names, [r#"{"name":"b","uses":null}"#, r#"{"name":"c","uses":9}"#, r#"{"name":"a","uses":1}"#]);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn order_by_key(mut self, key: OrderKey) -> Result<Self> {
        if self.orders.len() == crate::query::ORDER_KEYS_MAX {
            let count_max = crate::query::ORDER_KEYS_MAX;
            return Err(QueryError::TooManyOrderKeys { count: count_max + 1, count_max }.into());
        }
        self.collection.state.shape.check_order(&key.path)?;
        self.orders.push(key);
        Ok(self)
    }

    /// Skips the first `offset` matches.
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(serde::Serialize, serde::Deserialize, Record)]
    /// # #[record(name = "tags")]
    /// # struct Tag { #[record(key)] name: String, uses: u32 }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let typed = db.collection::<Tag>()?;
    /// # db.write(|tx| { for (name, uses) in [("a", 1), ("b", 5), ("c", 9)] { typed.insert(tx, &Tag { name: name.into(), uses })?; } Ok(()) })?;
    /// let tags = db.dyn_collection("tags")?;
    /// assert_eq!(tags.all().offset(2).fetch(&db)?[0].to_json(), r#"{"name":"c","uses":9}"#);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn offset(mut self, offset: usize) -> Self {
        self.offset = offset;
        self
    }

    /// Returns at most `limit` matches.
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(serde::Serialize, serde::Deserialize, Record)]
    /// # #[record(name = "tags")]
    /// # struct Tag { #[record(key)] name: String, uses: u32 }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let typed = db.collection::<Tag>()?;
    /// # db.write(|tx| { for (name, uses) in [("a", 1), ("b", 5), ("c", 9)] { typed.insert(tx, &Tag { name: name.into(), uses })?; } Ok(()) })?;
    /// let tags = db.dyn_collection("tags")?;
    /// assert_eq!(tags.all().limit(2).count(&db)?, 2);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = Some(limit);
        self
    }

    /// How the query runs, as [`crate::Query::explain`] shows a typed query: the access path
    /// (a primary-key lookup or range, an index range, or a full scan), the filter, and whether
    /// the order comes from the path or from an in-memory sort. An error if the query does not
    /// type-check against the stored shape.
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(serde::Serialize, serde::Deserialize, Record)]
    /// # #[record(name = "tags")]
    /// # struct Tag { #[record(key)] name: String, #[record(index)] uses: u32 }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let typed = db.collection::<Tag>()?;
    /// # db.write(|tx| { for (name, uses) in [("a", 1), ("b", 5), ("c", 9)] { typed.insert(tx, &Tag { name: name.into(), uses })?; } Ok(()) })?;
    /// let tags = db.dyn_collection("tags")?;
    /// assert_eq!(tags.filter_text("uses > 1")?.explain()?.to_string(), "index range on uses [1 .. ∞), filter uses > 1, sort in memory");
    /// assert_eq!(tags.filter_text(r#"name == "b""#)?.explain()?.to_string(), "primary key lookup b");
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn explain(&self) -> Result<Plan> {
        let schema = &self.collection.schema;
        self.spec(&query_layout(schema)).explain()
    }

    /// The query as the engine runs it, with the collection's key `layout`.
    fn spec<'q>(&'q self, layout: &'q KindsKey<'q>) -> QuerySpec<'q> {
        QuerySpec {
            state: &self.collection.state,
            key: layout,
            predicate: self.predicate.as_ref(),
            orders: &self.orders,
            offset: self.offset,
            limit: self.limit,
        }
    }

    /// Calls `visit` with each match in order (after the offset, up to the limit); stops
    /// early when it returns false.
    pub(super) fn run(&self, snapshot: &dyn Snapshot, mut visit: impl FnMut(&[u8], &[u8]) -> Result<bool>) -> Result<()> {
        let schema = &self.collection.schema;
        let layout = query_layout(schema);
        for candidate in self.spec(&layout).run(snapshot)? {
            let (key, bytes) = candidate?;
            if !visit(&key, bytes)? {
                break;
            }
        }
        Ok(())
    }

    /// The matching records.
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(serde::Serialize, serde::Deserialize, Record)]
    /// # #[record(name = "tags")]
    /// # struct Tag { #[record(key)] name: String, uses: u32 }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let typed = db.collection::<Tag>()?;
    /// # db.write(|tx| { for (name, uses) in [("a", 1), ("b", 5), ("c", 9)] { typed.insert(tx, &Tag { name: name.into(), uses })?; } Ok(()) })?;
    /// let tags = db.dyn_collection("tags")?;
    /// let names: Vec<String> = tags.filter_text("uses > 1")?.fetch(&db)?.iter().map(|r| r.to_json()).collect();
    /// assert_eq!(names.len(), 2);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn fetch(&self, source: &impl ReadSource) -> Result<Vec<DynRecord>> {
        source.with_snapshot(|snapshot| {
            let mut records = Vec::new();
            self.run(snapshot, |key, bytes| {
                records.push(DynRecord::read(&self.collection.state, key, bytes)?);
                Ok(true)
            })?;
            Ok(records)
        })
    }

    /// Calls `visit` with each matching record, from one snapshot, without collecting them;
    /// stops early when it returns false.
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(serde::Serialize, serde::Deserialize, Record)]
    /// # #[record(name = "tags")]
    /// # struct Tag { #[record(key)] name: String }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # db.collection::<Tag>()?;
    /// let mut seen = 0;
    /// db.dyn_collection("tags")?.all().for_each(&db, |_| { seen += 1; Ok(true) })?;
    /// assert_eq!(seen, 0);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn for_each(&self, source: &impl ReadSource, mut visit: impl FnMut(DynRecord) -> Result<bool>) -> Result<()> {
        source.with_snapshot(|snapshot| self.run(snapshot, |key, bytes| visit(DynRecord::read(&self.collection.state, key, bytes)?)))
    }

    /// How many records match.
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(serde::Serialize, serde::Deserialize, Record)]
    /// # #[record(name = "tags")]
    /// # struct Tag { #[record(key)] name: String, uses: u32 }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let typed = db.collection::<Tag>()?;
    /// # db.write(|tx| { for (name, uses) in [("a", 1), ("b", 5), ("c", 9)] { typed.insert(tx, &Tag { name: name.into(), uses })?; } Ok(()) })?;
    /// let tags = db.dyn_collection("tags")?;
    /// assert_eq!(tags.filter_text("uses == 5")?.count(&db)?, 1);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn count(&self, source: &impl ReadSource) -> Result<usize> {
        source.with_snapshot(|snapshot| {
            let mut count = 0;
            self.run(snapshot, |_, _| {
                count += 1;
                Ok(true)
            })?;
            Ok(count)
        })
    }
}
