//! Subscriptions to one dictionary key through the database's change bus.

use super::{keys, Dictionary};
use crate::error::Result;
use crate::store::{ChangeStream, FeedEvent};
use serde::de::DeserializeOwned;
use std::marker::PhantomData;
use std::time::Duration;

/// What happened to a subscribed key.
#[derive(Debug, Clone, PartialEq)]
pub enum DictEvent<T> {
    /// The value when the subscription started (`None`: absent).
    Initial(Option<T>),
    /// A new value reached storage.
    Updated(T),
    /// The key was removed from storage.
    Deleted,
}

/// A stream of [`DictEvent`]s for one key; iterating blocks, dropping unsubscribes.
pub struct DictStream<T> {
    changes: ChangeStream,
    initial: Option<Result<Option<T>>>,
    state: KeyState<T>,
}

struct KeyState<T> {
    dictionary: Dictionary,
    key: String,
    _type: PhantomData<fn() -> T>,
}

impl<T: DeserializeOwned> DictStream<T> {
    pub(super) fn new(dictionary: Dictionary, key: &str) -> Result<Self> {
        let changes = dictionary.inner.db.subscribe();
        let initial = Some(dictionary.get::<T>(key));
        Ok(DictStream { changes, initial, state: KeyState { dictionary, key: key.to_owned(), _type: PhantomData } })
    }

    /// The next event, waiting at most `timeout`.
    pub fn recv_timeout(&mut self, timeout: Duration) -> Option<Result<DictEvent<T>>> {
        if let Some(initial) = self.initial.take() {
            return Some(initial.map(DictEvent::Initial));
        }
        let state = &mut self.state;
        self.changes.wait_for(Some(timeout), |event| state.handle(event))
    }
}

impl<T: DeserializeOwned> Iterator for DictStream<T> {
    type Item = Result<DictEvent<T>>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(initial) = self.initial.take() {
            return Some(initial.map(DictEvent::Initial));
        }
        let state = &mut self.state;
        self.changes.wait_for(None, |event| state.handle(event))
    }
}

impl<T: DeserializeOwned> KeyState<T> {
    fn decode(&self, bytes: &[u8]) -> Result<T> {
        let inner = &self.dictionary.inner;
        let doc = tessera_value::Doc::from_untrusted(bytes).map_err(|error| inner.value_error(&self.key, error))?;
        tessera_value::from_value(doc.root()).map_err(|error| inner.value_error(&self.key, error))
    }

    fn handle(&mut self, event: FeedEvent) -> Option<Result<DictEvent<T>>> {
        let keyspace = self.dictionary.inner.keyspace.name().to_owned();
        match event {
            FeedEvent::Batch(batch) => {
                let mut outcome = None;
                for change in batch.changes.iter().filter(|c| *c.keyspace == *keyspace) {
                    match &change.new {
                        Some(record) => {
                            if let Some(bytes) = keys::matches(&self.key, &change.key, record) {
                                outcome = Some(self.decode(bytes).map(DictEvent::Updated));
                            }
                        }
                        None => {
                            let held = change.old.as_deref().is_some_and(|old| keys::matches(&self.key, &change.key, old).is_some());
                            let hash = &self.dictionary.inner.long_key_hash;
                            if held || (change.old.is_none() && keys::may_hold(hash, &self.key, &change.key)) {
                                outcome = Some(Ok(DictEvent::Deleted));
                            }
                        }
                    }
                }
                outcome
            }
            FeedEvent::Lagged { .. } => Some(self.dictionary.get::<T>(&self.key).map(|value| match value {
                Some(value) => DictEvent::Updated(value),
                None => DictEvent::Deleted,
            })),
        }
    }
}
