//! One query subscription's state: its result in order, kept current commit by commit by
//! merging the changed records' sort keys, with the changeset computed in the same pass.

use super::changeset::{diff_by_key, CoalesceKeys, Diff, ResultChange};
use super::event::QueryMailbox;
use super::mailbox::Policy;
use super::matcher::Anchor;
use crate::collection::{decode, sort_key, Collection, CollectionState, Query, QueryParts, Record};
use crate::error::Result;
use crate::query::Truth;
use crate::store::{Change, ChangeDemand, ReadSource};
use crate::Db;
use std::collections::HashSet;
use std::sync::{Arc, Weak};

/// Where a record of a merged result came from.
#[derive(Clone, Copy)]
pub(super) enum Origin {
    /// It stayed, at this old position.
    Kept(usize),
    /// It is a new version: of a record that was at `moved_from`, or of one new to the result.
    New { moved_from: Option<usize> },
}

/// One record of a live result: its sort key (order fields, then primary key) and value.
pub(super) struct Entry<T> {
    pub(super) sort: Arc<[u8]>,
    pub(super) key_start: usize,
    pub(super) value: Arc<T>,
}

impl<T> Entry<T> {
    pub(super) fn key(&self) -> &[u8] {
        &self.sort[self.key_start..]
    }
}

pub(super) struct QuerySub<T> {
    pub(super) parts: QueryParts,
    pub(super) orders: Vec<sort_key::SortField>,
    /// The order as text: subscriptions with equal signatures share sort keys.
    pub(super) orders_signature: String,
    pub(super) anchors: Vec<Anchor>,
    pub(super) exact: bool,
    pub(super) entries: Vec<Entry<T>>,
    /// `entries` holds every match (not cut by the limit).
    pub(super) complete: bool,
    pub(super) since: u64,
    pub(super) policy: Policy,
    pub(super) mailbox: Weak<QueryMailbox<T>>,
    /// Keeps writers recording changes while the subscription is registered.
    pub(super) _demand: ChangeDemand,
}

/// The sort key of a stored record for a query's order.
pub(super) fn sort_key_of(orders: &[sort_key::SortField], state: &CollectionState, bytes: &[u8], key: &[u8]) -> SortKey {
    let mut out = Vec::with_capacity(key.len() + 18 * orders.len());
    let doc = if orders.is_empty() { None } else { state.open_stored(bytes).ok() };
    sort_key::encode_record(orders, doc.map(|doc| doc.root()), key, &mut out);
    let key_start = out.len() - key.len(); // the primary key is the tail
    (Arc::from(out), key_start)
}

/// A sort key and where the primary key starts in it.
pub(super) type SortKey = (Arc<[u8]>, usize);

/// The sort keys of each change's old and new version, computed once per commit for each
/// distinct order (subscriptions with the same `order by` share them).
pub(super) type SortKeys = Vec<std::sync::OnceLock<(Option<SortKey>, Option<SortKey>)>>;

impl<T: Record> QuerySub<T> {
    pub(super) fn window_end(&self) -> usize {
        self.parts.limit.map_or(usize::MAX, |limit| self.parts.offset.saturating_add(limit))
    }

    pub(super) fn visible(&self) -> std::ops::Range<usize> {
        let start = self.parts.offset.min(self.entries.len());
        start..self.entries.len().min(self.window_end())
    }

    pub(super) fn matches(&self, state: &CollectionState, bytes: Option<&[u8]>) -> bool {
        let Some(bytes) = bytes else { return false };
        match &self.parts.predicate {
            None => true,
            Some(predicate) => state.open_stored(bytes).is_ok_and(|doc| predicate.eval(doc.root()) == Truth::True),
        }
    }

    /// Reads the result from storage: at subscribe time, and to refill a limited result.
    pub(super) fn load(&mut self, db: &Db, state: &Arc<CollectionState>) -> Result<()> {
        let mut parts = self.parts.clone();
        parts.offset = 0;
        parts.limit = self.parts.limit.map(|_| self.window_end());
        let query = Query::from_parts(Collection::<T>::from_state(db.clone(), state.clone()), &parts);
        let (sequence, rows) = db.with_snapshot(|snapshot| Ok((snapshot.view_sequence(), query.entries(snapshot)?)))?;
        let mut entries = Vec::with_capacity(rows.len());
        for (key, bytes) in rows {
            let value = Arc::new(decode::<T>(state, &key, &bytes)?);
            let (sort, key_start) = sort_key_of(&self.orders, state, &bytes, &key);
            entries.push(Entry { sort, key_start, value });
        }
        self.complete = entries.len() < self.window_end();
        self.entries = entries;
        self.since = sequence;
        Ok(())
    }

    pub(super) fn keys_of(&self, range: std::ops::Range<usize>) -> Vec<Box<[u8]>> {
        self.entries[range].iter().map(|entry| Box::from(entry.key())).collect()
    }

    pub(super) fn change(&self, base_len: usize, diff: Diff, keys: Option<Box<CoalesceKeys>>) -> ResultChange<T> {
        let (deletions, insertions, modifications, moves) = diff;
        let result = Arc::new(self.entries[self.visible()].iter().map(|entry| entry.value.clone()).collect());
        ResultChange { sequence: self.since, result, deletions, insertions, modifications, moves, resynced: false, base_len, keys }
    }

    /// Applies one commit's changes (`hits`: change index, old version anchored, new version
    /// anchored); returns the changeset, if the visible result changed.
    pub(super) fn apply(&mut self, commit: &Commit<'_, T>, hits: &[Hit], sort_keys: &SortKeys) -> Result<Option<ResultChange<T>>> {
        let Commit { sequence, changes, values, db, state } = *commit;
        let old_visible = self.visible();
        // The previous keys: for coalescing, and for the changeset of a refill (which only an
        // incomplete result can need).
        let base_keys = (self.policy == Policy::LatestOnly || !self.complete).then(|| self.keys_of(old_visible.clone()));
        let boundary = (!self.complete).then(|| self.entries.last().map(|e| e.sort.clone())).flatten();
        let mut removed = vec![false; self.entries.len()];
        let mut modified = vec![false; self.entries.len()]; // changed in place, same position
        let mut any_modified_visible = false;
        // New versions to insert, with the old position of a record that moves.
        let mut inserted: Vec<(Entry<T>, Option<usize>)> = Vec::new();
        let mut any_removed = false;
        for &(index, old_hit, new_hit) in hits {
            let change = changes[index];
            let (old_match, new_match) = if self.exact {
                (old_hit, new_hit)
            } else {
                (self.matches(state, change.old.as_deref()), self.matches(state, change.new.as_deref()))
            };
            if !old_match && !new_match {
                continue;
            }
            let (old_all, new_all) = sort_keys[index].get_or_init(|| {
                let of = |bytes: &Option<Box<[u8]>>| bytes.as_deref().map(|bytes| sort_key_of(&self.orders, state, bytes, &change.key));
                (of(&change.old), of(&change.new))
            });
            let position = match (old_match, &old_all) {
                (true, Some((sort, _))) => self.entries.binary_search_by(|e| sort_key::compare(&e.sort, sort)).ok(),
                _ => None,
            };
            let new_sort = if new_match { new_all.as_ref() } else { None };
            match (position, new_sort) {
                (Some(position), Some((sort, _))) if **sort == *self.entries[position].sort => {
                    self.entries[position].value = values.get(index, changes, state)?;
                    modified[position] = true;
                    any_modified_visible |= old_visible.contains(&position);
                }
                (position, new_sort) => {
                    if let Some(position) = position {
                        removed[position] = true;
                        any_removed = true;
                    }
                    if let Some((sort, key_start)) = new_sort {
                        // Past the last record of an incomplete result, storage may hold
                        // records this one should follow: leave it to a refill.
                        if boundary.as_ref().is_some_and(|last| sort_key::compare(sort, last).is_gt()) {
                            continue;
                        }
                        let entry = Entry { sort: sort.clone(), key_start: *key_start, value: values.get(index, changes, state)? };
                        inserted.push((entry, position));
                    }
                }
            }
        }
        if !any_removed && inserted.is_empty() && !any_modified_visible {
            return Ok(None);
        }
        inserted.sort_by(|a, b| sort_key::compare(&a.0.sort, &b.0.sort));
        // Merge the survivors with the insertions, remembering where each came from.
        let old_entries = std::mem::take(&mut self.entries);
        let mut origin: Vec<Origin> = Vec::with_capacity(old_entries.len() + inserted.len());
        let mut merged = Vec::with_capacity(old_entries.len() + inserted.len());
        let mut inserted = inserted.into_iter().peekable();
        for (position, entry) in old_entries.into_iter().enumerate() {
            if removed[position] {
                continue;
            }
            while inserted.peek().is_some_and(|(next, _)| sort_key::compare(&next.sort, &entry.sort).is_lt()) {
                let (next, moved_from) = inserted.next().expect("peeked");
                merged.push(next);
                origin.push(Origin::New { moved_from });
            }
            merged.push(entry);
            origin.push(Origin::Kept(position));
        }
        for (entry, moved_from) in inserted {
            merged.push(entry);
            origin.push(Origin::New { moved_from });
        }
        if merged.len() > self.window_end() {
            // Records were cut off by the limit: the result no longer holds every match.
            self.complete = false;
            merged.truncate(self.window_end());
            origin.truncate(self.window_end());
        }
        self.entries = merged;
        self.since = sequence;
        if self.entries.len() < self.window_end() && !self.complete {
            // The limited result shrank past what it held: read it again.
            self.load(db, state)?;
            let new_keys = self.keys_of(self.visible());
            let mut modified: HashSet<Box<[u8]>> = changes.iter().map(|c| Box::from(&*c.key)).collect();
            if self.since > sequence {
                // The snapshot read holds later commits too, whose own changes will be skipped
                // as already included: any record of the window may have changed in place, so
                // each counts as modified (one reported modified needlessly is redrawn; one
                // changed but not reported would keep a stale value in the subscriber's view).
                modified.extend(new_keys.iter().cloned());
            }
            let old_keys = base_keys.unwrap_or_default();
            let diff = diff_by_key(&old_keys, &new_keys, &modified);
            if diff.0.is_empty() && diff.1.is_empty() && diff.2.is_empty() && diff.3.is_empty() {
                return Ok(None); // later commits undid what this one changed in the window
            }
            let keys = (self.policy == Policy::LatestOnly).then(|| Box::new(CoalesceKeys { base: old_keys, new: new_keys, modified }));
            return Ok(Some(self.change(old_visible.len(), diff, keys)));
        }
        // Changesets of the visible window, from the merge's record of origins.
        let new_visible = self.visible();
        let mut accounted = vec![false; old_visible.len()];
        let (mut deletions, mut insertions, mut modifications, mut moves) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for new_position in new_visible.clone() {
            let relative = new_position - new_visible.start;
            match origin[new_position] {
                Origin::Kept(old_position) | Origin::New { moved_from: Some(old_position) } if old_visible.contains(&old_position) => {
                    let from = old_position - old_visible.start;
                    accounted[from] = true;
                    if matches!(origin[new_position], Origin::New { .. }) {
                        moves.push((from, relative));
                        modifications.push(relative);
                    } else if modified[old_position] {
                        modifications.push(relative);
                    }
                }
                _ => insertions.push(relative),
            }
        }
        deletions.extend(accounted.iter().enumerate().filter(|(_, done)| !**done).map(|(relative, _)| relative));
        if deletions.is_empty() && insertions.is_empty() && modifications.is_empty() && moves.is_empty() {
            return Ok(None);
        }
        let keys = match base_keys.filter(|_| self.policy == Policy::LatestOnly) {
            Some(base) => {
                let new = self.keys_of(self.visible());
                let modified = changes.iter().map(|c| Box::from(&*c.key)).collect();
                Some(Box::new(CoalesceKeys { base, new, modified }))
            }
            None => None,
        };
        Ok(Some(self.change(old_visible.len(), (deletions, insertions, modifications, moves), keys)))
    }
}

/// (change index, old version anchored, new version anchored).
pub(super) type Hit = (usize, bool, bool);

/// One commit, as every subscription's update sees it.
pub(super) struct Commit<'c, T> {
    pub(super) sequence: u64,
    pub(super) changes: &'c [&'c Change],
    pub(super) values: &'c Values<T>,
    pub(super) db: &'c Db,
    pub(super) state: &'c Arc<CollectionState>,
}

impl<T> Clone for Commit<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Commit<'_, T> {}

/// The changed records' new versions, decoded at most once per commit.
pub(super) struct Values<T> {
    pub(super) decoded: Vec<std::sync::OnceLock<Option<Arc<T>>>>,
}

impl<T: Record> Values<T> {
    pub(super) fn new(changes: usize) -> Self {
        Values { decoded: (0..changes).map(|_| std::sync::OnceLock::new()).collect() }
    }

    pub(super) fn get(&self, index: usize, changes: &[&Change], collection: &CollectionState) -> Result<Arc<T>> {
        let change = changes[index];
        let value = self.decoded[index].get_or_init(|| {
            let bytes = change.new.as_deref()?;
            decode::<T>(collection, &change.key, bytes).ok().map(Arc::new)
        });
        value.clone().ok_or_else(|| match change.new.as_deref() {
            // The decode failed above; decoding again gives its error.
            Some(bytes) => decode::<T>(collection, &change.key, bytes).err().unwrap_or_else(|| {
                crate::Error::Corrupted(format!("collection {:?}: a record decoded once and failed once", collection.name))
            }),
            // Values are only asked for changes with a new version; say so if that ever breaks.
            None => crate::Error::Corrupted(format!("collection {:?}: a deleted record was asked for its value", collection.name)),
        })
    }
}
