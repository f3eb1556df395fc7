//! The subscriptions that follow one primary key: object subscriptions, and query
//! subscriptions whose whole result is that key's record (a query that is exactly
//! `key == literal`, with no offset and room for a row). Both are kept in one map by stored
//! key, so a commit finds them with one hash lookup per changed record and decodes a record
//! once for all of them, with no matcher, sort key or merge: such a query's result is the
//! record or nothing, and its changeset follows from whether the record was there before.

use super::changeset::{CoalesceKeys, ObjectChange, ResultChange};
use super::event::{Event, ObjectMailbox, QueryMailbox};
use super::mailbox::{Policy, SubscriptionEnd, Wakes};
use super::results::{Results, vector_of};
use crate::store::ChangeDemand;
use std::sync::{Arc, Weak};

/// One object subscription: where its deliveries go, and the commit it has seen.
pub(super) struct ObjectSub<T> {
    pub(super) mailbox: Weak<ObjectMailbox<T>>,
    pub(super) since: u64,
    /// Keeps writers recording changes while the subscription is registered.
    pub(super) _demand: ChangeDemand,
}

/// One query subscription whose result is one key's record or nothing.
pub(super) struct KeyQuerySub<T> {
    pub(super) mailbox: Weak<QueryMailbox<T>>,
    pub(super) since: u64,
    /// The result holds the record (as of `since`).
    pub(super) present: bool,
    pub(super) policy: Policy,
    /// Keeps writers recording changes while the subscription is registered.
    pub(super) _demand: ChangeDemand,
}

/// Every subscription to one primary key.
pub(super) struct KeyWatchers<T> {
    pub(super) objects: Vec<ObjectSub<T>>,
    pub(super) queries: Vec<KeyQuerySub<T>>,
}

impl<T> Default for KeyWatchers<T> {
    fn default() -> Self {
        KeyWatchers { objects: Vec::new(), queries: Vec::new() }
    }
}

/// The events one commit queues, woken in batches (see [`Wakes`]).
pub(super) struct KeyWakes<T> {
    pub(super) objects: Wakes<Event<Option<Arc<T>>, ObjectChange<T>>>,
    pub(super) queries: Wakes<Event<Results<T>, ResultChange<T>>>,
}

impl<T> KeyWakes<T> {
    pub(super) fn new() -> Self {
        KeyWakes { objects: Wakes::new(), queries: Wakes::new() }
    }

    pub(super) fn wake_all(&mut self) {
        self.objects.wake_all();
        self.queries.wake_all();
    }
}

impl<T> KeyWatchers<T> {
    /// Whether a subscription started before commit `sequence` (one that it concerns).
    pub(super) fn follows(&self, sequence: u64) -> bool {
        self.objects.iter().any(|sub| sequence > sub.since) || self.queries.iter().any(|sub| sequence > sub.since)
    }

    /// Drops subscriptions whose handle is gone; returns how many.
    pub(super) fn prune(&mut self) -> usize {
        let before = self.len();
        self.objects.retain(|sub| sub.mailbox.strong_count() > 0);
        self.queries.retain(|sub| sub.mailbox.strong_count() > 0);
        before - self.len()
    }

    pub(super) fn len(&self) -> usize {
        self.objects.len() + self.queries.len()
    }

    /// Ends every subscription with `end`.
    pub(super) fn end_all(&self, end: &SubscriptionEnd) {
        for mailbox in self.objects.iter().filter_map(|sub| sub.mailbox.upgrade()) {
            mailbox.end_with(end.clone());
        }
        for mailbox in self.queries.iter().filter_map(|sub| sub.mailbox.upgrade()) {
            mailbox.end_with(end.clone());
        }
    }

    /// Queues what commit `sequence` did to the record at `key` (`Ok(None)`: deleted) for
    /// every subscription to it that started before the commit. A record that does not
    /// decode ends those subscriptions with the error instead, never a skipped change that a
    /// subscriber could not tell from no change.
    pub(super) fn deliver(
        &mut self,
        key: &[u8],
        sequence: u64,
        record: std::result::Result<Option<Arc<T>>, Arc<crate::Error>>,
        wakes: &mut KeyWakes<T>,
    ) {
        for sub in self.objects.iter().filter(|sub| sequence > sub.since) {
            let Some(mailbox) = sub.mailbox.upgrade() else { continue };
            match &record {
                Ok(Some(value)) => wakes.objects.push(mailbox, Event::Changed(ObjectChange::Updated(value.clone()))),
                Ok(None) => wakes.objects.push(mailbox, Event::Changed(ObjectChange::Deleted)),
                Err(error) => mailbox.end_with(SubscriptionEnd::Failed(error.clone())),
            }
        }
        for sub in self.queries.iter_mut().filter(|sub| sequence > sub.since) {
            let Some(mailbox) = sub.mailbox.upgrade() else { continue };
            match &record {
                Ok(value) => {
                    if let Some(change) = sub.change(key, sequence, value.clone()) {
                        wakes.queries.push(mailbox, Event::Changed(change));
                    }
                }
                Err(error) => mailbox.end_with(SubscriptionEnd::Failed(error.clone())),
            }
        }
    }
}

impl<T> KeyQuerySub<T> {
    /// The changeset of commit `sequence`, which left `value` at the subscription's key:
    /// the row inserted, modified or deleted; `None` for a delete of a record that was not
    /// there.
    pub(super) fn change(&mut self, key: &[u8], sequence: u64, value: Option<Arc<T>>) -> Option<ResultChange<T>> {
        let was_present = std::mem::replace(&mut self.present, value.is_some());
        self.since = sequence;
        let (deletions, insertions, modifications) = match (was_present, value.is_some()) {
            (false, false) => return None,
            (false, true) => (Vec::new(), vec![0], Vec::new()),
            (true, true) => (Vec::new(), Vec::new(), vec![0]),
            (true, false) => (vec![0], Vec::new(), Vec::new()),
        };
        let keys = (self.policy == Policy::LatestOnly).then(|| {
            let present = |is: bool| if is { vec![Box::<[u8]>::from(key)] } else { Vec::new() };
            Box::new(CoalesceKeys { base: present(was_present), new: present(self.present), modified: [Box::from(key)].into() })
        });
        Some(ResultChange {
            sequence,
            result: Results::of(vector_of(value)),
            deletions,
            insertions,
            modifications,
            moves: Vec::new(),
            resynced: false,
            base_len: usize::from(was_present),
            keys,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::live::mailbox::Coalesce;

    fn sub(db: &crate::Db, present: bool, policy: Policy) -> KeyQuerySub<u32> {
        KeyQuerySub { mailbox: Weak::new(), since: 1, present, policy, _demand: db.demand_changes() }
    }

    fn db() -> (tempfile::TempDir, crate::Db) {
        let dir = tempfile::tempdir().unwrap();
        let db = crate::Db::open(dir.path().join("db")).unwrap();
        (dir, db)
    }

    #[test]
    fn each_transition_of_the_one_row_gives_its_changeset() {
        let rows = |change: &ResultChange<u32>| change.result.iter().map(|value| **value).collect::<Vec<_>>();
        let (_dir, db) = db();
        let mut live = sub(&db, false, Policy::EveryChange);
        assert!(live.change(b"k", 2, None).is_none(), "a delete of an absent record changes nothing");
        assert_eq!(live.since, 2);
        let inserted = live.change(b"k", 3, Some(Arc::new(7))).expect("inserted");
        assert_eq!((inserted.insertions.as_slice(), inserted.base_len, rows(&inserted)), (&[0][..], 0, vec![7]));
        assert!(inserted.deletions.is_empty() && inserted.modifications.is_empty() && inserted.keys.is_none());
        let modified = live.change(b"k", 4, Some(Arc::new(8))).expect("modified");
        assert_eq!((modified.modifications.as_slice(), modified.base_len, rows(&modified)), (&[0][..], 1, vec![8]));
        assert!(modified.insertions.is_empty() && modified.deletions.is_empty());
        let deleted = live.change(b"k", 5, None).expect("deleted");
        assert_eq!((deleted.deletions.as_slice(), deleted.base_len, deleted.result.len()), (&[0][..], 1, 0));
        assert_eq!(deleted.sequence, 5);
        assert!(!live.present);
    }

    #[test]
    fn a_latest_only_change_carries_the_keys_to_merge_it() {
        let (_dir, db) = db();
        let mut live = sub(&db, true, Policy::LatestOnly);
        let mut merged = live.change(b"k", 2, None).expect("deleted");
        let again = live.change(b"k", 3, Some(Arc::new(1))).expect("inserted again");
        merged.coalesce(again);
        assert_eq!(merged.deletions, Vec::<usize>::new(), "there before and after: {merged:?}");
        assert_eq!((merged.modifications.as_slice(), merged.result.len(), merged.sequence), (&[0][..], 1, 3));
    }
}
