//! What the live engine needs to know about a collection's records ([`LiveRecord`]): how a
//! stored record decodes to what a delivery carries, and the primary key's layout for
//! reading a result from storage. A record type knows both from its derive; a dynamic
//! collection (records as [`crate::collection::DynRecord`]) from its stored schema. Nothing
//! else in the engine depends on the record, so typed and dynamic subscriptions share it.

use crate::collection::key_layout::{KeyLayout, RecordKey};
use crate::collection::{CollectionState, QueryParts, Record, decode};
use crate::error::Result;
use crate::store::Snapshot;
use std::sync::Arc;

/// A record as the live engine delivers it.
pub(crate) trait LiveRecord: Sized + Send + Sync + 'static {
    /// What reading a query's result needs about the primary key besides the collection's
    /// state: nothing for a record type, the stored key fields and kinds for a dynamic
    /// collection.
    type Keys: Send + Sync + 'static;

    /// The record stored as `bytes` under `key`; a typed error naming the collection and key
    /// when it does not decode.
    fn decode_stored(state: &CollectionState, key: &[u8], bytes: &[u8]) -> Result<Self>;

    /// The primary key's field, when the key has exactly one.
    fn sole_key_field(keys: &Self::Keys) -> Option<&str>;

    /// Calls `run` with the primary key's layout, for planning.
    fn with_layout<R>(keys: &Self::Keys, run: impl FnOnce(&dyn KeyLayout) -> R) -> R;
}

impl<T: Record> LiveRecord for T {
    type Keys = ();

    fn decode_stored(state: &CollectionState, key: &[u8], bytes: &[u8]) -> Result<T> {
        // A hand-written `Decode` may panic. On the delivery thread that would end the commit's
        // delivery to every subscription after this one, untold (the feed drops a hook's
        // panic): it is this record's error instead, which ends the subscriptions that read it.
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| decode::<T>(state, key, bytes))).unwrap_or_else(|payload| {
            Err(state.decode_error(key, format!("its decoder panicked: {}", crate::store::panic_message(&*payload))))
        })
    }

    fn sole_key_field(_: &()) -> Option<&str> {
        match T::KEY_FIELDS {
            [field] => Some(field),
            _ => None,
        }
    }

    fn with_layout<R>(_: &(), run: impl FnOnce(&dyn KeyLayout) -> R) -> R {
        run(&RecordKey::<T>::LAYOUT)
    }
}

/// A query's matches in `snapshot` (every row from 0 to the window's end: the offset is not
/// applied), as (primary key, stored bytes) in result order.
pub(super) fn entries<T: LiveRecord>(
    state: &Arc<CollectionState>,
    keys: &T::Keys,
    parts: &QueryParts,
    snapshot: &dyn Snapshot,
) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    T::with_layout(keys, |layout| {
        let spec = parts.spec(state, layout);
        // Another open that changed only the indexes ends no subscription (see
        // `Engine::apply`), but the state's index ids are stale: read by records alone.
        let found = match state.current_in(snapshot) {
            Ok(()) => spec.run(snapshot)?,
            Err(_) => spec.run_by_records(snapshot)?,
        };
        found.map(|c| c.map(|(key, bytes)| (key.into_owned(), bytes.to_vec()))).collect()
    })
}
