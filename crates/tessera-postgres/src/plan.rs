//! A group of commits turned into what each table must do: the net change of every key (its
//! last change in the group wins, since the feed holds whole new values), the upserts
//! decoded into rows and the deletes as stored keys. Pure but for decoding: no PostgreSQL.

use crate::cells::{self, Row};
use crate::collections::Collections;
use crate::columns::TableShape;
use crate::error::{ReplicateError, Result};
use std::collections::BTreeMap;
use tessera::store::ChangeBatch;

/// One table's part of a group.
pub(crate) struct TablePlan {
    pub(crate) shape: TableShape,
    pub(crate) upserts: Vec<Row>,
    pub(crate) deletes: Vec<Vec<u8>>,
}

/// The changes of `batches` to replicated collections, by table (in table order).
pub(crate) fn plan(collections: &Collections, batches: &[ChangeBatch]) -> Result<Vec<TablePlan>> {
    // keyspace → key → the last new value (None: deleted).
    let mut net: BTreeMap<&str, BTreeMap<&[u8], Option<&[u8]>>> = BTreeMap::new();
    for batch in batches {
        for change in &batch.changes {
            if collections.of_keyspace(&change.keyspace).is_none() {
                continue;
            }
            net.entry(&change.keyspace).or_default().insert(&change.key, change.new.as_deref());
        }
    }
    let mut plans = Vec::with_capacity(net.len());
    for (keyspace, keys) in net {
        let replicated = collections.of_keyspace(keyspace).expect("kept only replicated keyspaces");
        let mut plan = TablePlan { shape: replicated.shape.clone(), upserts: Vec::new(), deletes: Vec::new() };
        for (key, new) in keys {
            let Some(stored) = new else {
                plan.deletes.push(key.to_vec());
                continue;
            };
            let record = replicated.collection.decode_stored(key, stored)?;
            let row = cells::row(&plan.shape, key, record.value()).map_err(|misfit| ReplicateError::Value {
                collection: replicated.collection.name().to_owned(),
                key: replicated.collection.display_key(key).unwrap_or_else(|| format!("{key:02x?}")),
                field: misfit.field,
                problem: misfit.problem,
            })?;
            plan.upserts.push(row);
        }
        plans.push(plan);
    }
    plans.sort_by(|a, b| a.shape.table.cmp(&b.shape.table));
    Ok(plans)
}

/// The first batches of `batches` that one transaction applies: at least one, then more
/// while the changes stay within `changes_max`.
pub(crate) fn group_len(batches: &[ChangeBatch], changes_max: usize) -> usize {
    let mut changes = 0usize;
    for (position, batch) in batches.iter().enumerate() {
        changes += batch.changes.len();
        if position > 0 && changes > changes_max {
            return position;
        }
    }
    batches.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera::store::{Change, ChangeKind};

    fn batch(sequence: u64, changes: usize) -> ChangeBatch {
        let change = Change { keyspace: "k".into(), key: Box::from(&b"a"[..]), kind: ChangeKind::Insert, old: None, new: None };
        ChangeBatch { sequence, changes: vec![change; changes] }
    }

    #[test]
    fn a_group_takes_one_commit_at_least_and_more_within_the_bound() {
        let batches = [batch(1, 5), batch(2, 5), batch(3, 5)];
        assert_eq!(group_len(&batches, 10), 2);
        assert_eq!(group_len(&batches, 9), 1);
        assert_eq!(group_len(&batches, 1), 1);
        assert_eq!(group_len(&batches, 15), 3);
        assert_eq!(group_len(&[], 15), 0);
    }
}
