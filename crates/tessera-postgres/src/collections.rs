//! Which collections are replicated, with their dynamic handles and table shapes, by records
//! keyspace; read again from the catalog when the feed shows a schema or shared-key change or
//! a collection this set does not know.

use crate::columns::TableShape;
use crate::error::{ReplicateError, Result};
use std::collections::{BTreeSet, HashMap};
use tessera::Db;
use tessera::collection::DynCollection;

/// Keyspaces whose changes mean a collection's schema or shared keys changed.
const SCHEMA_KEYSPACES: [&str; 2] = ["tessera.schema", "tessera.keys"];
/// Prefix of a collection's records keyspace.
const RECORDS_PREFIX: &str = "tessera.col.";

/// One replicated collection.
pub(crate) struct Replicated {
    pub(crate) collection: DynCollection,
    pub(crate) shape: TableShape,
}

/// The replicated collections.
pub(crate) struct Collections {
    /// `None`: every collection.
    only: Option<BTreeSet<String>>,
    /// By records keyspace.
    by_keyspace: HashMap<String, Replicated>,
}

impl Collections {
    /// The collections of `db` (those in `only` if given; each must exist).
    pub(crate) fn load(db: &Db, only: Option<&[String]>) -> Result<Collections> {
        let only: Option<BTreeSet<String>> = only.map(|names| names.iter().cloned().collect());
        let mut collections = Collections { only, by_keyspace: HashMap::new() };
        collections.reload(db)?;
        if let Some(only) = &collections.only {
            for name in only {
                if !collections.by_keyspace.values().any(|replicated| replicated.collection.name() == name) {
                    return Err(ReplicateError::NoSuchCollection { collection: name.clone() });
                }
            }
        }
        Ok(collections)
    }

    /// Reads the catalog and every replicated collection's schema again. The old handles are
    /// dropped first, so that the new ones load the stored schema and shared keys.
    pub(crate) fn reload(&mut self, db: &Db) -> Result<()> {
        self.by_keyspace.clear();
        for name in db.catalog()?.collections {
            if self.only.as_ref().is_some_and(|only| !only.contains(&name)) {
                continue;
            }
            let collection = db.dyn_collection(&name)?;
            let shape = TableShape::of(&name, collection.schema())?;
            self.by_keyspace.insert(collection.records_keyspace().to_owned(), Replicated { collection, shape });
        }
        Ok(())
    }

    /// The collection whose records `keyspace` holds, if replicated.
    pub(crate) fn of_keyspace(&self, keyspace: &str) -> Option<&Replicated> {
        self.by_keyspace.get(keyspace)
    }

    /// Every replicated collection, in name order.
    pub(crate) fn all(&self) -> Vec<&Replicated> {
        let mut all: Vec<&Replicated> = self.by_keyspace.values().collect();
        all.sort_by(|a, b| a.shape.table.cmp(&b.shape.table));
        all
    }

    /// Whether a change to `keyspace` calls for [`Collections::reload`] before the change is
    /// applied: a schema or shared-key change, or the records of a collection not known yet
    /// (created after the set was read) that the filter admits.
    pub(crate) fn stale_for(&self, keyspace: &str) -> bool {
        if SCHEMA_KEYSPACES.contains(&keyspace) {
            return true;
        }
        match keyspace.strip_prefix(RECORDS_PREFIX) {
            Some(name) => !self.by_keyspace.contains_key(keyspace) && self.only.as_ref().is_none_or(|only| only.contains(name)),
            None => false,
        }
    }
}
