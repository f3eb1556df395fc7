//! A commit's changes as the in-process feed holds them from the commit to their delivery.
//!
//! A local commit's batch is its transaction's change log itself, moved into the feed: the
//! committing thread copies nothing after the commit, and the feed's hooks (the live engine,
//! document and dictionary watches) read each change in place as a [`ChangeView`]. The owned
//! [`ChangeBatch`] that listeners receive is made from the log only when a listener exists,
//! once, on the delivering thread. A batch of another process's commit, read from the durable
//! feed, arrives owned.

use super::change_log::{ChangeLog, ChangeView};
use super::feed::ChangeBatch;
use std::sync::Arc;

/// Where the changes are.
enum Source {
    /// A local commit's finished change log.
    Log(ChangeLog),
    /// Changes made elsewhere (another process's commit).
    Owned(Arc<ChangeBatch>),
}

/// See the module docs.
pub(crate) struct Published {
    sequence: u64,
    /// How many changes: decides who delivers the batch (see [`super::feed`]).
    len: usize,
    source: Source,
}

impl Published {
    /// A local commit's batch: `log` (finished, with at least one change) moves in whole.
    pub(crate) fn from_log(sequence: u64, log: ChangeLog) -> Published {
        let len = log.len();
        debug_assert!(len > 0, "an empty commit publishes no batch");
        assert!(log.keeps_old_values(), "listeners' changes carry old values");
        Published { sequence, len, source: Source::Log(log) }
    }

    /// A batch made elsewhere.
    pub(crate) fn from_batch(batch: ChangeBatch) -> Published {
        let (sequence, len) = (batch.sequence, batch.changes.len());
        Published { sequence, len, source: Source::Owned(Arc::new(batch)) }
    }

    /// The commit's sequence number.
    pub(crate) fn sequence(&self) -> u64 {
        self.sequence
    }

    /// How many changes the batch holds.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The changes, in the order the transaction made them, borrowed.
    pub(crate) fn changes(&self) -> Box<dyn DoubleEndedIterator<Item = ChangeView<'_>> + '_> {
        match &self.source {
            Source::Log(log) => Box::new(log.changes()),
            Source::Owned(batch) => Box::new(batch.changes.iter().map(|change| change.view())),
        }
    }

    /// The changes to `keyspace`, in the order the transaction made them, borrowed and
    /// collected (the live engine's view of one collection's changes in a commit): the log
    /// keeps the other keyspaces' changes out without making their views, and the vector is
    /// made at its size once (collecting through [`Published::changes`], a boxed
    /// iterator and a filter, cost a large commit about 220 instructions a change).
    pub(crate) fn changes_in(&self, keyspace: &str) -> Vec<ChangeView<'_>> {
        match &self.source {
            Source::Log(log) => {
                // Its count from the log's totals: no room made for the other keyspaces' changes.
                let count = log.totals().find(|(name, _)| *name == keyspace).map_or(0, |(_, totals)| totals.count);
                if count == 0 {
                    return Vec::new(); // without a walk of the other keyspaces' changes
                }
                let mut changes = Vec::with_capacity(count);
                changes.extend(log.changes_of(|name| name == keyspace));
                debug_assert_eq!(changes.len(), count, "the totals count the keyspace's changes");
                changes
            }
            Source::Owned(batch) => {
                batch.changes.iter().filter(|change| &*change.keyspace == keyspace).map(|change| change.view()).collect()
            }
        }
    }

    /// Calls `visit` with each change to `keyspace`, in the order the transaction made them,
    /// borrowed and not collected: for a walk that needs each change once, in order (the live
    /// engine with object subscriptions alone). [`Published::changes_in`] collects them for
    /// random access: 72 bytes a change, 720 KB made and freed for a 10,000-change commit.
    pub(crate) fn for_each_in<'a>(&'a self, keyspace: &str, visit: impl FnMut(ChangeView<'a>)) {
        match &self.source {
            Source::Log(log) => log.changes_of(|name| name == keyspace).for_each(visit),
            Source::Owned(batch) => {
                batch.changes.iter().filter(|change| &*change.keyspace == keyspace).map(|change| change.view()).for_each(visit)
            }
        }
    }

    /// The batch as listeners receive it, owned: a log's changes are copied (delivery asks
    /// once per batch, and only when a listener exists).
    pub(crate) fn owned(&self) -> Arc<ChangeBatch> {
        match &self.source {
            Source::Owned(batch) => batch.clone(),
            Source::Log(log) => Arc::new(ChangeBatch { sequence: self.sequence, changes: log.to_changes() }),
        }
    }

    /// Gives a log's memory back for the next write transaction (see
    /// [`ChangeLog::give_back`]).
    pub(crate) fn recycle(self) {
        if let Source::Log(log) = self.source {
            log.give_back();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Change, ChangeKind};

    /// `(keyspace, key)` of each change.
    fn names<'a>(changes: impl Iterator<Item = ChangeView<'a>>) -> Vec<(String, Vec<u8>)> {
        changes.map(|change| (change.keyspace.to_string(), change.key.to_vec())).collect()
    }

    #[test]
    fn one_keyspaces_changes_are_the_batchs_changes_to_it_in_order() {
        let (records, index): (Arc<str>, Arc<str>) = ("records".into(), "index".into());
        let mut log = ChangeLog::start(true);
        log.record_new(&records, b"a", b"1");
        log.record_new(&index, b"a1", b"");
        let staged = log.stage(&records, b"b", Some(b"2"), Some(b"3"));
        log.record_staged(staged, b"b", Some(b"3"));
        let staged = log.stage(&records, b"c", Some(b"4"), Some(b"4"));
        log.record_staged(staged, b"c", Some(b"4")); // written back as it was: drops out
        log.record_new(&records, b"d", b"5");
        let batch = Published::from_log(7, log.finish());
        let expected = |keyspace: &str| names(batch.changes().filter(|change| change.keyspace == keyspace));
        assert_eq!(names(batch.changes_in("records").into_iter()), expected("records"));
        assert_eq!(expected("records").len(), 3, "a, b and d");
        assert_eq!(names(batch.changes_in("index").into_iter()), expected("index"));
        assert!(batch.changes_in("other").is_empty());
        for keyspace in ["records", "index", "other"] {
            let mut walked = Vec::new();
            batch.for_each_in(keyspace, |change| walked.push(change));
            assert_eq!(walked, batch.changes_in(keyspace), "{keyspace}: the same changes, in the same order");
        }
        let change = |keyspace: &Arc<str>, key: &[u8]| Change {
            keyspace: keyspace.clone(),
            key: key.into(),
            kind: ChangeKind::Insert,
            old: None,
            new: Some(Box::from(&b"v"[..])),
        };
        let owned = Published::from_batch(ChangeBatch {
            sequence: 8,
            changes: vec![change(&records, b"x"), change(&index, b"y"), change(&records, b"z")],
        });
        assert_eq!(
            names(owned.changes_in("records").into_iter()),
            vec![("records".into(), b"x".to_vec()), ("records".into(), b"z".to_vec())]
        );
        let mut walked = Vec::new();
        owned.for_each_in("records", |change| walked.push(change));
        assert_eq!(walked, owned.changes_in("records"), "an owned batch walks as it collects");
    }
}
