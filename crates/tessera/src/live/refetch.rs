//! Query subscriptions kept by refetching: for queries the incremental engine cannot follow
//! (dynamic collections have no record type), the query runs again after each commit that
//! changed its collection, and the changeset is the difference between the two results, by
//! primary key, with a row counted as modified when its value differs. Same shape and
//! delivery as every other subscription.

use super::changeset::{diff_by_key, CoalesceKeys, ResultChange};
use super::subscription::QuerySubscription;
use super::watch::{watch, Follow};
use super::Policy;
use crate::error::Result;
use crate::store::{ChangeBatch, ReadTxn};
use crate::Db;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Rows of a query result: each row's stored primary key and its value, in result order.
pub(crate) type Rows<T> = Vec<(Box<[u8]>, Arc<T>)>;

/// Subscribes to a query over `keyspace` that `fetch` runs in a snapshot. `fetch` runs on the
/// feed's thread and gets a [`Db`] to read with; it must not hold one (see [`watch`]).
pub(crate) fn refetching_query<T, F>(db: &Db, keyspace: Arc<str>, fetch: F) -> Result<QuerySubscription<T>>
where
    T: PartialEq + Send + Sync + 'static,
    F: Fn(&Db, &ReadTxn<'_>) -> Result<Rows<T>> + Send + 'static,
{
    watch(db, Policy::EveryChange, |txn| {
        let mut previous = fetch(db, txn)?;
        let initial = Arc::new(previous.iter().map(|(_, value)| value.clone()).collect());
        let follow: Follow<ResultChange<T>> = Box::new(move |batch: &ChangeBatch, db: &Db| {
            if !batch.changes.iter().any(|change| *change.keyspace == *keyspace) {
                return None;
            }
            let rows = db.read_txn().and_then(|txn| Ok((fetch(db, &txn)?, txn.sequence())));
            let (rows, sequence) = match rows {
                Ok(found) => found,
                Err(error) => return Some(Err(error)),
            };
            let change = difference(&previous, &rows, sequence);
            previous = rows;
            change.map(Ok)
        });
        Ok((initial, follow))
    })
}

/// The changeset from `old` to `new`, or `None` if they are equal.
fn difference<T: PartialEq>(old: &Rows<T>, new: &Rows<T>, sequence: u64) -> Option<ResultChange<T>> {
    let old_values: HashMap<&[u8], &Arc<T>> = old.iter().map(|(key, value)| (&**key, value)).collect();
    let modified: HashSet<Box<[u8]>> =
        new.iter().filter(|(key, value)| old_values.get(&**key).is_some_and(|old| ***old != **value)).map(|(key, _)| key.clone()).collect();
    let old_keys: Vec<Box<[u8]>> = old.iter().map(|(key, _)| key.clone()).collect();
    let new_keys: Vec<Box<[u8]>> = new.iter().map(|(key, _)| key.clone()).collect();
    let (deletions, insertions, modifications, moves) = diff_by_key(&old_keys, &new_keys, &modified);
    if deletions.is_empty() && insertions.is_empty() && modifications.is_empty() && moves.is_empty() {
        return None;
    }
    Some(ResultChange {
        sequence,
        result: Arc::new(new.iter().map(|(_, value)| value.clone()).collect()),
        deletions,
        insertions,
        modifications,
        moves,
        resynced: false,
        base_len: old.len(),
        keys: Some(Box::new(CoalesceKeys { base: old_keys, new: new_keys, modified })),
    })
}
