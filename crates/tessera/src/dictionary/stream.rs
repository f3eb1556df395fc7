//! Subscriptions to one dictionary key: value subscriptions ([`crate::live::ValueSubscription`])
//! that follow the change bus with the same shape as every other subscription.

use super::{Dictionary, keys, lock};
use crate::Db;
use crate::error::{Error, Result};
use crate::live::{Follow, Policy, ValueSubscription};
use crate::store::Published;
use serde::de::DeserializeOwned;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// Subscribes to `key`: its value now (as [`Dictionary::get`] reads it), then its value each
/// time a write of it is committed (`None`: removed; durable once flushed).
///
/// Pending writes are saved first, and the initial value is read from storage in the
/// subscription's own snapshot: every value it reports is then one storage held. (It took a
/// pending write for its initial value, and heard only of storage: a pending write that never
/// reached storage, cleared, removed again or set back before the save, left it on a value the
/// dictionary no longer had, for good. Found by review.)
pub(super) fn subscribe<T: DeserializeOwned + Send + 'static>(dictionary: &Dictionary, key: &str) -> Result<ValueSubscription<T>> {
    let inner = &dictionary.inner;
    if inner.sequence.load(Ordering::SeqCst) > lock(&inner.flusher.state).flushed {
        inner.flush_pending()?;
    }
    // What following the key needs, without the dictionary (which holds a `Db`: the engine
    // that runs this lives inside the database, so that would keep it open forever).
    let keyspace = inner.keyspace.name().to_owned();
    let hash = inner.long_key_hash.clone();
    let name: Arc<str> = inner.name.clone();
    let key = key.to_owned();
    crate::live::watch(&inner.db, Policy::EveryChange, |txn| {
        // Kept as bytes: a later write of the same bytes is not a change.
        let initial_bytes = keys::load(txn, &inner.keyspace, &hash, &key)?;
        let initial = initial_bytes.as_deref().map(|bytes| decode(&name, &key, bytes)).transpose()?;
        let mut last = initial_bytes;
        let follow: Follow<Option<T>> = Box::new(move |batch: &Published, _: &Db| {
            // What storage holds for the key after this batch, if the batch wrote it.
            let mut written: Option<Option<&[u8]>> = None;
            for change in batch.changes().filter(|c| c.keyspace == keyspace) {
                match change.new {
                    Some(record) => {
                        if let Some(bytes) = keys::matches(&key, change.key, record) {
                            written = Some(Some(bytes));
                        }
                    }
                    None => {
                        let held = change.old.is_some_and(|old| keys::matches(&key, change.key, old).is_some());
                        if held || (change.old.is_none() && keys::may_hold(&hash, &key, change.key)) {
                            written = Some(None);
                        }
                    }
                }
            }
            let written = written?;
            if written == last.as_deref() {
                return None; // the value already reported
            }
            last = written.map(<[u8]>::to_vec);
            Some(written.map(|bytes| decode(&name, &key, bytes)).transpose())
        });
        Ok((initial, follow))
    })
}

fn decode<T: DeserializeOwned>(dictionary: &str, key: &str, bytes: &[u8]) -> Result<T> {
    let error = |message: String| Error::DictionaryValue { dictionary: dictionary.to_owned(), key: key.to_owned(), message };
    let doc = crate::stored_doc::validate(bytes).map_err(|e| error(e.to_string()))?;
    tessera_value::from_value(doc.root()).map_err(|e| error(e.to_string()))
}
