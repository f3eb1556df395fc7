//! Observing a document or one field: value subscriptions ([`crate::live::ValueSubscription`])
//! that follow the change feed with the same shape as every other subscription.

use super::{Collection, Document, fields};
use crate::Db;
use crate::error::Result;
use crate::live::{Follow, Policy, ValueSubscription};
use crate::store::{Keyspace, Published};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;
use std::sync::Arc;

/// What a subscription keeps of a document, without a [`Db`]: the engine that runs it lives
/// inside the database, so a database handle here would keep it open forever.
struct Place<T> {
    keyspace: Keyspace,
    name: Arc<str>,
    options: super::DocumentsOptions,
    id: Arc<str>,
    prefix: Vec<u8>,
    _type: std::marker::PhantomData<fn() -> T>,
}

impl<T> Place<T> {
    fn of(document: &Document<T>) -> Self {
        let collection = &document.collection;
        Place {
            keyspace: collection.keyspace.clone(),
            name: collection.name.clone(),
            options: collection.options.clone(),
            id: document.id.clone(),
            prefix: document.prefix.clone(),
            _type: std::marker::PhantomData,
        }
    }

    /// The document again, with `db` to read through, for decoding.
    fn document(&self, db: &Db) -> Document<T> {
        let collection =
            Collection { db: db.clone(), keyspace: self.keyspace.clone(), name: self.name.clone(), options: self.options.clone() };
        Document { collection: Arc::new(collection), id: self.id.clone(), prefix: self.prefix.clone(), _type: std::marker::PhantomData }
    }
}

/// Subscribes to a document's value: its value now, then its value after each commit that
/// touches it (one event per commit, not one per field; `None` once deleted).
///
/// The subscription keeps the document's stored fields and applies each commit's changes to
/// them, so every event is the document exactly as that commit left it, with no read.
pub(super) fn document<T>(document: &Document<T>) -> Result<ValueSubscription<T>>
where
    T: Serialize + DeserializeOwned + Send + 'static,
{
    let place = Place::of(document);
    crate::live::watch(&document.collection.db, Policy::EveryChange, |txn| {
        let mut fields: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        for entry in txn.prefix(&place.keyspace, &place.prefix)? {
            let (key, value) = entry?;
            fields.insert(key.to_vec(), value.to_vec());
        }
        let initial = decode(&document.clone(), &fields)?;
        let follow: Follow<Option<T>> = Box::new(move |batch: &Published, db: &Db| {
            if !apply(&place, &mut fields, batch) {
                return None;
            }
            Some(decode(&place.document(db), &fields))
        });
        Ok((initial, follow))
    })
}

fn decode<T: Serialize + DeserializeOwned>(document: &Document<T>, fields: &BTreeMap<Vec<u8>, Vec<u8>>) -> Result<Option<T>> {
    fields::decode(document, fields.iter().map(|(k, v)| Ok((k.as_slice(), v.as_slice()))))
}

/// Applies a commit's changes to the document's fields; false if it touched none.
fn apply<T>(place: &Place<T>, fields: &mut BTreeMap<Vec<u8>, Vec<u8>>, batch: &Published) -> bool {
    let keyspace = place.keyspace.name();
    let mut touched = false;
    for change in batch.changes().filter(|c| c.keyspace == keyspace && c.key.starts_with(&place.prefix)) {
        touched = true;
        match change.new {
            Some(bytes) => fields.insert(change.key.to_vec(), bytes.to_vec()),
            None => fields.remove(change.key),
        };
    }
    touched
}

/// Subscribes to one field of a document: its value now, then its value after each commit
/// that changes its stored bytes (`None` once removed). In a deep document the field is its key
/// and every key under it (a nested struct's leaves), assembled as `get` assembles them.
pub(super) fn field<T, V>(document: &Document<T>, name: &str) -> Result<ValueSubscription<V>>
where
    V: DeserializeOwned + Send + 'static,
{
    let path = fields::path_of(name, document.collection.options.deep)?.into_owned();
    let field_key = document.field_key(&path)?;
    let place: Place<()> = Place::of(&Document {
        collection: document.collection.clone(),
        id: document.id.clone(),
        prefix: document.prefix.clone(),
        _type: std::marker::PhantomData,
    });
    let name = name.to_owned();
    let own_key = field_key.clone();
    // In a deep document, the keys on the field's path, where a value stored whole (a plain
    // handle's) may hold it.
    let deep = document.collection.options.deep;
    let ancestors: Vec<Vec<u8>> =
        if deep { fields::ancestor_keys(&field_key, document.prefix.len()).map(<[u8]>::to_vec).collect() } else { Vec::new() };
    // The field's stored keys and bytes: its key, the keys under it (in a plain document only a
    // deep handle stores those, and reading them is an error naming the field), and its
    // ancestors' keys.
    let watched_ancestors = ancestors.clone();
    let watched_key = field_key.clone();
    let in_field = move |key: &[u8]| fields::at_or_under(key, &watched_key) || watched_ancestors.iter().any(|ancestor| ancestor == key);
    crate::live::watch(&document.collection.db, Policy::EveryChange, |txn| {
        let mut stored: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        for ancestor in &ancestors {
            if let Some(bytes) = txn.get(&place.keyspace, ancestor)? {
                stored.insert(ancestor.clone(), bytes.to_vec());
            }
        }
        if let Some(bytes) = txn.get(&place.keyspace, &own_key)? {
            stored.insert(own_key.clone(), bytes.to_vec());
        }
        let mut under = own_key;
        under.push(super::PATH_SEPARATOR);
        for entry in txn.prefix(&place.keyspace, &under)? {
            let (key, bytes) = entry?;
            stored.insert(key.to_vec(), bytes.to_vec());
        }
        let initial = decode_field(&place.document(&document.collection.db), &name, &path, &field_key, &stored)?;
        let follow: Follow<Option<V>> = Box::new(move |batch: &Published, db: &Db| {
            let keyspace = place.keyspace.name();
            let mut changes = batch.changes().filter(|c| c.keyspace == keyspace && in_field(c.key)).peekable();
            changes.peek()?;
            let document = place.document(db);
            let before = field_state(&document, &name, &path, &field_key, &stored);
            for change in changes {
                match change.new {
                    Some(bytes) => stored.insert(change.key.to_vec(), bytes.to_vec()),
                    None => stored.remove(change.key),
                };
            }
            if let (Ok(before), Ok(after)) = (before, field_state(&document, &name, &path, &field_key, &stored))
                && same_value(&before, &after)
            {
                return None; // distinct until changed
            }
            Some(decode_field(&document, &name, &path, &field_key, &stored))
        });
        Ok((initial, follow))
    })
}

/// What an observer of the field compares between commits: the field's value as a document
/// of its own (its subtree's entries assembled, or what an ancestor stored whole holds at its
/// path), compared by value, so that the same value stored another way (spread into leaves,
/// or rewritten whole in its ancestor) is not a change.
fn field_state(
    document: &Document<()>,
    name: &str,
    path: &[u8],
    field_key: &[u8],
    stored: &BTreeMap<Vec<u8>, Vec<u8>>,
) -> Result<Option<Vec<u8>>> {
    let entries = stored.iter().map(|(key, bytes)| Ok((key.as_slice(), bytes.as_slice())));
    if document.collection.options.deep {
        fields::deep_field_value(document, name, path, field_key, entries)
    } else {
        Ok(stored.get(field_key).cloned())
    }
}

/// Whether two field states hold the same value.
fn same_value(before: &Option<Vec<u8>>, after: &Option<Vec<u8>>) -> bool {
    match (before, after) {
        (None, None) => true,
        (Some(before), Some(after)) => {
            before == after
                || matches!(
                    (crate::stored_doc::validate(before), crate::stored_doc::validate(after)),
                    (Ok(before), Ok(after)) if before.root() == after.root()
                )
        }
        _ => false,
    }
}

fn decode_field<V: DeserializeOwned>(
    document: &Document<()>,
    name: &str,
    path: &[u8],
    field_key: &[u8],
    stored: &BTreeMap<Vec<u8>, Vec<u8>>,
) -> Result<Option<V>> {
    let entries = stored.iter().map(|(key, bytes)| Ok((key.as_slice(), bytes.as_slice())));
    if document.collection.options.deep {
        fields::decode_deep_field(document, name, path, field_key, entries)
    } else {
        fields::decode_subtree(document, name, path, entries)
    }
}
