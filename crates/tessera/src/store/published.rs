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
