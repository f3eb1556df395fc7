//! Subscriptions to one dictionary key: value subscriptions ([`crate::live::ValueSubscription`])
//! that follow the change bus with the same shape as every other subscription.

use super::{Dictionary, keys};
use crate::Db;
use crate::error::{Error, Result};
use crate::live::{Follow, Policy, ValueSubscription};
use crate::store::Published;
use serde::de::DeserializeOwned;
use std::sync::Arc;

/// Subscribes to `key`: its value now (as [`Dictionary::get`] reads it), then its value each
/// time a write of it reaches storage (`None`: removed).
pub(super) fn subscribe<T: DeserializeOwned + Send + 'static>(dictionary: &Dictionary, key: &str) -> Result<ValueSubscription<T>> {
    let inner = &dictionary.inner;
    // What following the key needs, without the dictionary (which holds a `Db`: the engine
    // that runs this lives inside the database, so that would keep it open forever).
    let keyspace = inner.keyspace.name().to_owned();
    let hash = inner.long_key_hash.clone();
    let name: Arc<str> = inner.name.clone();
    let key = key.to_owned();
    crate::live::watch(&inner.db, Policy::EveryChange, |_| {
        let initial = dictionary.get::<T>(&key)?;
        let follow: Follow<Option<T>> = Box::new(move |batch: &Published, _: &Db| {
            let mut outcome = None;
            for change in batch.changes().filter(|c| c.keyspace == keyspace) {
                match change.new {
                    Some(record) => {
                        if let Some(bytes) = keys::matches(&key, change.key, record) {
                            outcome = Some(decode(&name, &key, bytes).map(Some));
                        }
                    }
                    None => {
                        let held = change.old.is_some_and(|old| keys::matches(&key, change.key, old).is_some());
                        if held || (change.old.is_none() && keys::may_hold(&hash, &key, change.key)) {
                            outcome = Some(Ok(None));
                        }
                    }
                }
            }
            outcome
        });
        Ok((initial, follow))
    })
}

fn decode<T: DeserializeOwned>(dictionary: &str, key: &str, bytes: &[u8]) -> Result<T> {
    let error = |message: String| Error::DictionaryValue { dictionary: dictionary.to_owned(), key: key.to_owned(), message };
    let doc = tessera_value::Doc::from_untrusted(bytes).map_err(|e| error(e.to_string()))?;
    tessera_value::from_value(doc.root()).map_err(|e| error(e.to_string()))
}
