//! Observing a document or one field through the database's change feed.

use super::{fields, Document};
use crate::error::Result;
use crate::store::{ChangeBatch, ChangeStream, FeedEvent};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// The values of a document, one per commit that touches it (see [`Document::observe`]).
/// Iterating blocks; dropping the stream unsubscribes.
///
/// The stream keeps the document's stored fields and applies each commit's changes to them, so
/// every event is the document exactly as that commit left it, with no read from storage. Only
/// after missing commits (a full queue, `FeedEvent::Lagged`) does it read the document again.
pub struct DocumentStream<T> {
    changes: ChangeStream,
    state: DocumentState<T>,
}

struct DocumentState<T> {
    document: Document<T>,
    /// Full key → stored bytes of the document's fields, as of `sequence`.
    fields: BTreeMap<Vec<u8>, Vec<u8>>,
    sequence: u64,
    /// An error from the initial read, reported as the first event.
    pending_error: Option<crate::Error>,
}

impl<T: Serialize + DeserializeOwned> DocumentStream<T> {
    pub(crate) fn new(document: Document<T>) -> Self {
        let changes = document.collection.db.subscribe(); // first, so no commit falls between
        let mut state = DocumentState { document, fields: BTreeMap::new(), sequence: 0, pending_error: None };
        if let Err(error) = state.reload() {
            state.pending_error = Some(error);
        }
        DocumentStream { changes, state }
    }

    /// The next value, waiting at most `timeout`.
    pub fn recv_timeout(&mut self, timeout: Duration) -> Option<Result<Option<T>>> {
        let state = &mut self.state;
        self.changes.wait_for(Some(timeout), |event| state.handle(event))
    }
}

impl<T: Serialize + DeserializeOwned> Iterator for DocumentStream<T> {
    type Item = Result<Option<T>>;

    fn next(&mut self) -> Option<Self::Item> {
        let state = &mut self.state;
        self.changes.wait_for(None, |event| state.handle(event))
    }
}

impl<T: Serialize + DeserializeOwned> DocumentState<T> {
    /// Reads the stored fields afresh.
    fn reload(&mut self) -> Result<()> {
        let collection = &self.document.collection;
        let (fields, sequence) = collection.db.read(|tx| {
            let fields = tx
                .prefix(&collection.keyspace, &self.document.prefix)?
                .map(|entry| entry.map(|(k, v)| (k.to_vec(), v.to_vec())))
                .collect::<Result<BTreeMap<_, _>>>()?;
            Ok((fields, tx.sequence()))
        })?;
        self.fields = fields;
        self.sequence = sequence;
        Ok(())
    }

    fn current(&self) -> Result<Option<T>> {
        fields::decode(&self.document, self.fields.iter().map(|(k, v)| Ok((k.as_slice(), v.as_slice()))))
    }

    /// What `event` means for this document: its value after the commit if the commit touched
    /// it (or after a reload if commits were missed), `None` otherwise.
    fn handle(&mut self, event: FeedEvent) -> Option<Result<Option<T>>> {
        if let Some(error) = self.pending_error.take() {
            return Some(Err(error));
        }
        match event {
            FeedEvent::Batch(batch) => {
                if batch.sequence <= self.sequence || !self.apply(&batch) {
                    return None;
                }
                self.sequence = batch.sequence;
                Some(self.current())
            }
            FeedEvent::Lagged { .. } => Some(self.reload().and_then(|()| self.current())),
        }
    }

    /// Applies a commit's changes to this document's fields; false if it touched none.
    fn apply(&mut self, batch: &ChangeBatch) -> bool {
        let keyspace = self.document.collection.keyspace.name();
        let mut touched = false;
        for change in batch.changes.iter().filter(|c| &*c.keyspace == keyspace && c.key.starts_with(&self.document.prefix)) {
            touched = true;
            match &change.new {
                Some(bytes) => self.fields.insert(change.key.to_vec(), bytes.to_vec()),
                None => self.fields.remove(&*change.key),
            };
        }
        touched
    }
}

/// The values of one field, reported only when its stored bytes change (see
/// [`Document::observe_field`]).
pub struct FieldStream<V> {
    changes: ChangeStream,
    state: FieldState<V>,
}

struct FieldState<V> {
    document: Document<()>,
    name: String,
    field_key: Vec<u8>,
    last: Option<Option<Vec<u8>>>,
    _type: std::marker::PhantomData<fn() -> V>,
}

impl<V: DeserializeOwned> FieldStream<V> {
    pub(crate) fn new<T: Serialize + DeserializeOwned>(document: &Document<T>, name: &str) -> Result<Self> {
        let field_key = document.field_key(&fields::path_of(name, document.collection.options.deep)?)?;
        let changes = document.collection.db.subscribe();
        let untyped = Document {
            collection: document.collection.clone(),
            id: document.id.clone(),
            prefix: document.prefix.clone(),
            _type: std::marker::PhantomData,
        };
        // Start from the stored value, so that only changes are reported.
        let current = document.collection.db.read(|tx| Ok(tx.get(&document.collection.keyspace, &field_key)?.map(<[u8]>::to_vec)))?;
        let state = FieldState { document: untyped, name: name.into(), field_key, last: Some(current), _type: std::marker::PhantomData };
        Ok(FieldStream { changes, state })
    }

    /// The next changed value, waiting at most `timeout`.
    pub fn recv_timeout(&mut self, timeout: Duration) -> Option<Result<Option<V>>> {
        let state = &mut self.state;
        self.changes.wait_for(Some(timeout), |event| state.handle(event))
    }
}

impl<V: DeserializeOwned> Iterator for FieldStream<V> {
    type Item = Result<Option<V>>;

    fn next(&mut self) -> Option<Self::Item> {
        let state = &mut self.state;
        self.changes.wait_for(None, |event| state.handle(event))
    }
}

impl<V: DeserializeOwned> FieldState<V> {
    fn handle(&mut self, event: FeedEvent) -> Option<Result<Option<V>>> {
        let stored = match event {
            FeedEvent::Batch(batch) => {
                let keyspace = self.document.collection.keyspace.name();
                let change = batch.changes.iter().rev().find(|c| &*c.keyspace == keyspace && *c.key == *self.field_key)?;
                change.new.as_deref().map(<[u8]>::to_vec)
            }
            FeedEvent::Lagged { .. } => match self
                .document
                .collection
                .db
                .read(|tx| Ok(tx.get(&self.document.collection.keyspace, &self.field_key)?.map(<[u8]>::to_vec)))
            {
                Ok(stored) => stored,
                Err(error) => return Some(Err(error)),
            },
        };
        if self.last.as_ref() == Some(&stored) {
            return None; // distinct until changed
        }
        self.last = Some(stored.clone());
        Some(match stored {
            Some(bytes) => fields::decode_field(&self.document, &self.name, &bytes).map(Some),
            None => Ok(None),
        })
    }
}
