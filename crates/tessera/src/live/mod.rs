//! Live subscriptions: an object or a query, kept current from the change feed with
//! incremental changesets, never by re-running the query.
//!
//! ```
//! use serde::{Deserialize, Serialize};
//! use tessera::collection::{Order, Record};
//! use std::time::Duration;
//!
//! #[derive(Serialize, Deserialize, Record, Debug)]
//! struct Task { #[record(key)] id: u32, priority: i32 }
//!
//! # let dir = tempfile::tempdir().unwrap();
//! let db = tessera::Db::open(dir.path().join("db"))?;
//! let tasks = db.collection::<Task>()?;
//! let urgent = tasks.filter(Task::priority().ge(5)).order_by(Task::priority(), Order::Desc);
//! let live = tasks.subscribe_query(&urgent)?;
//! assert!(live.recv_timeout(Duration::from_secs(5)).unwrap().result.is_empty(), "the current result first");
//!
//! db.write(|tx| {
//!     tasks.insert(tx, &Task { id: 1, priority: 9 })?;
//!     tasks.insert(tx, &Task { id: 2, priority: 1 })
//! })?;
//! let change = live.recv_timeout(Duration::from_secs(5)).unwrap();
//! assert_eq!(change.insertions, [0]);
//! assert_eq!(change.result[0].id, 1);
//! # Ok::<(), tessera::Error>(())
//! ```
//!
//! **How a commit reaches a subscription.** The store's feed hands each committed batch, after
//! the write lock is released, to this module on the feed's delivery thread. Each changed
//! record's old and new versions are looked up in the [`matcher`] (hash maps for equality,
//! interval indexes for ranges, primary-key maps for object subscriptions), so only affected
//! subscriptions do any work; a subscription's result is then updated by merging, its
//! changeset computed in the same pass, and the changed records decoded once per commit
//! however many subscriptions they reach. A limited result that shrank is refilled from
//! storage, the one case that reads the database.
//!
//! **Changesets** are Realm-style: `deletions` are indices in the previous result, `insertions`
//! and `modifications` indices in the new one, `moves` pairs (previous index, new index) of
//! records whose position changed because their sort key did (they are also in
//! `modifications`). Apply deletions, then insertions, then moves, as a list view's batch
//! update does. A commit that does not change the result delivers nothing.
//!
//! **Consistency.** Each delivery carries the sequence of the commit it reflects; the result
//! equals what a read at that sequence returns. (A refill reads the newest snapshot: its
//! delivery carries that snapshot's sequence, and later commits it already includes are not
//! applied twice.)
//!
//! **Objects.** [`crate::Collection::subscribe_object`] delivers [`ObjectChange::Updated`] for
//! every commit that changes the record and [`ObjectChange::Deleted`] when it is removed. Unlike
//! Dflat, the subscription does not end on delete: a record inserted again under the same key
//! is delivered as `Updated`, so a view bound to a key follows it through delete and re-insert.

mod mailbox;
pub mod matcher;
mod subscription;

pub use mailbox::{Policy, QUEUE_LEN_MAX};
pub use subscription::{ObjectSubscription, QuerySubscription, SubscriptionHandle};

use crate::collection::{decode, sort_key, Collection, CollectionState, Order, Query, QueryParts, Record, TypeDesc};
use crate::error::Result;
use crate::query::{FieldPath, Truth};
use crate::store::{Change, ChangeBatch, ChangeDemand, ReadSource, WeakDb};
use crate::Db;
use mailbox::{Coalesce, Mailbox};
use matcher::{Anchor, Matcher};
use std::any::Any;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, Weak};
use tessera_value::{Doc, SharedKeys};

/// A change to a subscribed object.
#[derive(Debug)]
pub enum ObjectChange<T> {
    /// The record was written (updated, or inserted again after a delete).
    Updated(Arc<T>),
    /// The record was deleted.
    Deleted,
}

impl<T> Clone for ObjectChange<T> {
    fn clone(&self) -> Self {
        match self {
            ObjectChange::Updated(value) => ObjectChange::Updated(value.clone()),
            ObjectChange::Deleted => ObjectChange::Deleted,
        }
    }
}

impl<T> Coalesce for ObjectChange<T> {
    fn coalesce(&mut self, newer: Self) {
        *self = newer;
    }
}

/// What a commit did to a query's result (see the module docs for the index conventions).
#[derive(Debug)]
pub struct ResultChange<T> {
    /// The commit this result reflects.
    pub sequence: u64,
    /// The whole result after the commit, in order.
    pub result: Arc<Vec<Arc<T>>>,
    /// Indices in the previous result of records no longer in it.
    pub deletions: Vec<usize>,
    /// Indices in the new result of records new to it.
    pub insertions: Vec<usize>,
    /// Indices in the new result of records that stayed and changed.
    pub modifications: Vec<usize>,
    /// (previous index, new index) of records that stayed but moved.
    pub moves: Vec<(usize, usize)>,
    /// Length of the previous result.
    base_len: usize,
    /// Primary keys of the previous and new results, for coalescing (latest-only policy).
    keys: Option<Box<CoalesceKeys>>,
}

#[derive(Debug)]
struct CoalesceKeys {
    base: Vec<Box<[u8]>>,
    new: Vec<Box<[u8]>>,
    modified: HashSet<Box<[u8]>>,
}

impl<T> ResultChange<T> {
    /// Whether the change lists are all empty (only the first delivery of an empty result).
    pub fn is_empty(&self) -> bool {
        self.deletions.is_empty() && self.insertions.is_empty() && self.modifications.is_empty() && self.moves.is_empty()
    }
}

impl<T> Coalesce for ResultChange<T> {
    fn coalesce(&mut self, newer: Self) {
        match (self.keys.take(), newer.keys) {
            (Some(mine), Some(theirs)) => {
                let mut modified = mine.modified;
                modified.extend(theirs.modified);
                let diff = diff_by_key(&mine.base, &theirs.new, &modified);
                (self.deletions, self.insertions, self.modifications, self.moves) = diff;
                self.keys = Some(Box::new(CoalesceKeys { base: mine.base, new: theirs.new, modified }));
            }
            _ => {
                // Without keys, the merged change reloads: everything out, everything in.
                self.deletions = (0..self.base_len).collect();
                self.insertions = (0..newer.result.len()).collect();
                self.modifications.clear();
                self.moves.clear();
            }
        }
        self.sequence = newer.sequence;
        self.result = newer.result;
    }
}

type Diff = (Vec<usize>, Vec<usize>, Vec<usize>, Vec<(usize, usize)>);

/// Deletions, insertions, modifications and moves between two results given by primary key.
/// Records that stayed but are not on a longest increasing run of old positions moved.
fn diff_by_key(old: &[Box<[u8]>], new: &[Box<[u8]>], modified: &HashSet<Box<[u8]>>) -> Diff {
    let old_positions: HashMap<&[u8], usize> = old.iter().enumerate().map(|(i, k)| (&**k, i)).collect();
    let mut kept = HashSet::new();
    let mut insertions = Vec::new();
    let mut stayed = Vec::new(); // (old, new)
    for (new_index, key) in new.iter().enumerate() {
        match old_positions.get(&**key) {
            Some(&old_index) => {
                kept.insert(old_index);
                stayed.push((old_index, new_index));
            }
            None => insertions.push(new_index),
        }
    }
    let deletions = (0..old.len()).filter(|i| !kept.contains(i)).collect();
    let modifications = stayed.iter().filter(|(_, n)| modified.contains(&new[*n])).map(|(_, n)| *n).collect();
    // Longest increasing subsequence of old positions, in new order.
    let mut tails: Vec<usize> = Vec::new(); // indices into `stayed`
    let mut previous = vec![usize::MAX; stayed.len()];
    for i in 0..stayed.len() {
        let position = tails.partition_point(|&t| stayed[t].0 < stayed[i].0);
        if position > 0 {
            previous[i] = tails[position - 1];
        }
        if position == tails.len() {
            tails.push(i);
        } else {
            tails[position] = i;
        }
    }
    let mut in_order = vec![false; stayed.len()];
    let mut cursor = tails.last().copied();
    while let Some(i) = cursor {
        in_order[i] = true;
        cursor = (previous[i] != usize::MAX).then_some(previous[i]);
    }
    let moves = stayed.iter().zip(&in_order).filter(|(_, ordered)| !**ordered).map(|(pair, _)| *pair).collect();
    (deletions, insertions, modifications, moves)
}

/// Where a record of a merged result came from.
#[derive(Clone, Copy)]
enum Origin {
    /// It stayed, at this old position.
    Kept(usize),
    /// It is a new version: of a record that was at `moved_from`, or of one new to the result.
    New { moved_from: Option<usize> },
}

/// One record of a live result: its sort key (order fields, then primary key) and value.
struct Entry<T> {
    sort: Arc<[u8]>,
    key_start: usize,
    value: Arc<T>,
}

impl<T> Entry<T> {
    fn key(&self) -> &[u8] {
        &self.sort[self.key_start..]
    }
}

struct ObjectSub<T> {
    mailbox: Weak<Mailbox<ObjectChange<T>>>,
    since: u64,
    /// Keeps writers recording changes while the subscription is registered.
    _demand: ChangeDemand,
}

struct QuerySub<T> {
    parts: QueryParts,
    orders: Vec<(FieldPath, bool)>,
    /// The order as text: subscriptions with equal signatures share sort keys.
    orders_signature: String,
    anchors: Vec<Anchor>,
    exact: bool,
    entries: Vec<Entry<T>>,
    /// `entries` holds every match (not cut by the limit).
    complete: bool,
    since: u64,
    policy: Policy,
    mailbox: Weak<Mailbox<ResultChange<T>>>,
    /// Keeps writers recording changes while the subscription is registered.
    _demand: ChangeDemand,
}

/// The sort key of a stored record for a query's order.
fn sort_key_of(orders: &[(FieldPath, bool)], keys: &SharedKeys, bytes: &[u8], key: &[u8]) -> SortKey {
    let mut out = Vec::with_capacity(key.len() + 18 * orders.len());
    let doc = if orders.is_empty() { None } else { Doc::from_trusted_with_keys(bytes, keys).ok() };
    sort_key::encode_record(orders, doc.map(|doc| doc.root()), key, &mut out);
    let key_start = out.len() - key.len(); // the primary key is the tail
    (Arc::from(out), key_start)
}

/// A sort key and where the primary key starts in it.
type SortKey = (Arc<[u8]>, usize);

/// The sort keys of each change's old and new version, computed once per commit for each
/// distinct order (subscriptions with the same `order by` share them).
type SortKeys = Vec<std::sync::OnceLock<(Option<SortKey>, Option<SortKey>)>>;

impl<T: Record> QuerySub<T> {
    fn window_end(&self) -> usize {
        self.parts.limit.map_or(usize::MAX, |limit| self.parts.offset.saturating_add(limit))
    }

    fn visible(&self) -> std::ops::Range<usize> {
        let start = self.parts.offset.min(self.entries.len());
        start..self.entries.len().min(self.window_end())
    }

    fn matches(&self, keys: &SharedKeys, bytes: Option<&[u8]>) -> bool {
        let Some(bytes) = bytes else { return false };
        match &self.parts.predicate {
            None => true,
            Some(predicate) => Doc::from_trusted_with_keys(bytes, keys).is_ok_and(|doc| predicate.eval(doc.root()) == Truth::True),
        }
    }

    /// Reads the result from storage: at subscribe time, and to refill a limited result.
    fn load(&mut self, db: &Db, state: &Arc<CollectionState>) -> Result<()> {
        let mut parts = self.parts.clone();
        parts.offset = 0;
        parts.limit = self.parts.limit.map(|_| self.window_end());
        let query = Query::from_parts(Collection::<T>::from_state(db.clone(), state.clone()), &parts);
        let (sequence, rows) = db.with_snapshot(|snapshot| Ok((snapshot.view_sequence(), query.entries(snapshot)?)))?;
        let mut entries = Vec::with_capacity(rows.len());
        for (key, bytes) in rows {
            let value = Arc::new(decode::<T>(state, &key, &bytes)?);
            let (sort, key_start) = sort_key_of(&self.orders, &state.keys.shared, &bytes, &key);
            entries.push(Entry { sort, key_start, value });
        }
        self.complete = entries.len() < self.window_end();
        self.entries = entries;
        self.since = sequence;
        Ok(())
    }

    fn keys_of(&self, range: std::ops::Range<usize>) -> Vec<Box<[u8]>> {
        self.entries[range].iter().map(|entry| Box::from(entry.key())).collect()
    }

    fn change(&self, base_len: usize, diff: Diff, keys: Option<Box<CoalesceKeys>>) -> ResultChange<T> {
        let (deletions, insertions, modifications, moves) = diff;
        let result = Arc::new(self.entries[self.visible()].iter().map(|entry| entry.value.clone()).collect());
        ResultChange { sequence: self.since, result, deletions, insertions, modifications, moves, base_len, keys }
    }

    /// Applies one commit's changes (`hits`: change index, old version anchored, new version
    /// anchored); returns the changeset, if the visible result changed.
    fn apply(&mut self, commit: &Commit<'_, T>, hits: &[Hit], sort_keys: &SortKeys) -> Result<Option<ResultChange<T>>> {
        let Commit { sequence, changes, values, db, state } = *commit;
        let keys = &state.keys.shared;
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
                (self.matches(keys, change.old.as_deref()), self.matches(keys, change.new.as_deref()))
            };
            if !old_match && !new_match {
                continue;
            }
            let (old_all, new_all) = sort_keys[index].get_or_init(|| {
                let of = |bytes: &Option<Box<[u8]>>| bytes.as_deref().map(|bytes| sort_key_of(&self.orders, keys, bytes, &change.key));
                (of(&change.old), of(&change.new))
            });
            let position = match (old_match, &old_all) {
                (true, Some((sort, _))) => self.entries.binary_search_by(|e| e.sort.cmp(sort)).ok(),
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
                        if boundary.as_ref().is_some_and(|last| sort > last) {
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
        inserted.sort_by(|a, b| a.0.sort.cmp(&b.0.sort));
        // Merge the survivors with the insertions, remembering where each came from.
        let old_entries = std::mem::take(&mut self.entries);
        let mut origin: Vec<Origin> = Vec::with_capacity(old_entries.len() + inserted.len());
        let mut merged = Vec::with_capacity(old_entries.len() + inserted.len());
        let mut inserted = inserted.into_iter().peekable();
        for (position, entry) in old_entries.into_iter().enumerate() {
            if removed[position] {
                continue;
            }
            while inserted.peek().is_some_and(|(next, _)| next.sort < entry.sort) {
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
            let modified: HashSet<Box<[u8]>> = changes.iter().map(|c| Box::from(&*c.key)).collect();
            let old_keys = base_keys.unwrap_or_default();
            let diff = diff_by_key(&old_keys, &new_keys, &modified);
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
type Hit = (usize, bool, bool);

/// One commit, as every subscription's update sees it.
struct Commit<'c, T> {
    sequence: u64,
    changes: &'c [&'c Change],
    values: &'c Values<T>,
    db: &'c Db,
    state: &'c Arc<CollectionState>,
}

impl<T> Clone for Commit<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Commit<'_, T> {}

/// The changed records' new versions, decoded at most once per commit.
struct Values<T> {
    decoded: Vec<std::sync::OnceLock<Option<Arc<T>>>>,
}

impl<T: Record> Values<T> {
    fn new(changes: usize) -> Self {
        Values { decoded: (0..changes).map(|_| std::sync::OnceLock::new()).collect() }
    }

    fn get(&self, index: usize, changes: &[&Change], collection: &CollectionState) -> Result<Arc<T>> {
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

/// Work, in (subscription, change) pairs, from which a commit's updates are split over two
/// threads (a thread costs about as much as 1,000 pairs).
const PARALLEL_PAIRS_MIN: usize = 20_000;
/// What updating and delivering one subscription costs besides its pairs (a decode, a result
/// vector, a wake-up), in pairs.
const SUBSCRIPTION_COST_IN_PAIRS: usize = 16;

/// Every live subscription of one collection.
struct LiveCollection<T: Record> {
    state: Arc<CollectionState>,
    /// Object subscriptions by primary key. Every change of a commit is looked up here, so the
    /// hash is Fx, not SipHash (a third of a 10,000-change commit's dispatch went to hashing).
    /// The table holds only subscribed keys, so keys crafted to collide can cost a lookup one
    /// more comparison each, never make the table degrade.
    objects: rustc_hash::FxHashMap<Box<[u8]>, Vec<ObjectSub<T>>>,
    /// Query subscriptions by slot; a slot's index is the subscription's id in the matcher.
    queries: Vec<Option<QuerySub<T>>>,
    free_slots: Vec<usize>,
    matcher: Matcher,
}

/// The registry goes with the database's change feed: every subscription still open then ends,
/// so that `recv` returns `None` instead of waiting for deliveries that cannot come.
impl<T: Record> Drop for LiveCollection<T> {
    fn drop(&mut self) {
        for sub in self.objects.values().flatten() {
            if let Some(mailbox) = sub.mailbox.upgrade() {
                mailbox.end();
            }
        }
        for sub in self.queries.iter().flatten() {
            if let Some(mailbox) = sub.mailbox.upgrade() {
                mailbox.end();
            }
        }
    }
}

/// A collection's subscriptions, whatever the record type.
trait AnyLive: Send {
    /// Applies a commit; returns how many dead subscriptions were removed.
    fn apply(&mut self, batch: &ChangeBatch, db: &Db) -> usize;
    fn as_any(&mut self) -> &mut dyn Any;
}

impl<T: Record> LiveCollection<T> {
    /// Drops subscriptions whose handle is gone; returns how many.
    fn prune(&mut self) -> usize {
        let mut removed = 0;
        self.objects.retain(|_, subs| {
            let before = subs.len();
            subs.retain(|sub| sub.mailbox.strong_count() > 0);
            removed += before - subs.len();
            !subs.is_empty()
        });
        for slot in 0..self.queries.len() {
            if self.queries[slot].as_ref().is_some_and(|sub| sub.mailbox.strong_count() == 0) {
                if let Some(sub) = self.queries[slot].take() {
                    self.matcher.remove(slot as u64, &sub.anchors);
                    self.free_slots.push(slot);
                    removed += 1;
                }
            }
        }
        removed
    }
}

impl<T: Record> AnyLive for LiveCollection<T> {
    fn as_any(&mut self) -> &mut dyn Any {
        self
    }

    fn apply(&mut self, batch: &ChangeBatch, db: &Db) -> usize {
        let removed = self.prune();
        let changes: Vec<&Change> = batch.changes.iter().filter(|change| *change.keyspace == *self.state.records.name()).collect();
        if changes.is_empty() {
            return removed;
        }
        let values = Values::new(changes.len());
        for (index, change) in changes.iter().enumerate() {
            let Some(subs) = self.objects.get(&*change.key) else { continue };
            let event = match change.new {
                Some(_) => match values.get(index, &changes, &self.state) {
                    Ok(value) => ObjectChange::Updated(value),
                    Err(_) => continue, // a record that does not decode is not delivered
                },
                None => ObjectChange::Deleted,
            };
            for sub in subs.iter().filter(|sub| batch.sequence > sub.since) {
                if let Some(mailbox) = sub.mailbox.upgrade() {
                    mailbox.push(event.clone());
                }
            }
        }
        if self.queries.iter().all(Option::is_none) {
            return removed;
        }
        // Which subscriptions each change may affect: (change, old version hit, new hit).
        self.matcher.prepare();
        let mut hits: Vec<Vec<Hit>> = vec![Vec::new(); self.queries.len()];
        let mut component = Vec::with_capacity(32);
        let fields: Vec<(FieldPath, &matcher::FieldIndex)> =
            self.matcher.fields().map(|(path, field)| (FieldPath::new(path), field)).collect();
        // A string primary key's sort key is its stored key behind the string tag: anchors on
        // it are matched without reading the records.
        let string_key = matches!(T::KEY_FIELDS, [_]) && matches!(self.state.shape.resolve(T::KEY_FIELDS[0]), Some(TypeDesc::String));
        for (path, field) in &fields {
            let on_key = string_key && **path == *T::KEY_FIELDS[0];
            for (index, change) in changes.iter().enumerate() {
                for (bytes, is_new) in [(&change.old, false), (&change.new, true)] {
                    let Some(bytes) = bytes else { continue };
                    component.clear();
                    if on_key {
                        component.push(sort_key::TAG_STRING);
                        component.extend_from_slice(&change.key);
                    } else {
                        let Ok(doc) = Doc::from_trusted_with_keys(bytes, &self.state.keys.shared) else { continue };
                        sort_key::encode_value(path.lookup(doc.root()), &mut component);
                    }
                    field.lookup(&component, &mut |id| {
                        let list = &mut hits[id as usize];
                        match list.last_mut() {
                            Some(last) if last.0 == index => {
                                if is_new {
                                    last.2 = true;
                                } else {
                                    last.1 = true;
                                }
                            }
                            _ => list.push((index, !is_new, is_new)),
                        }
                    });
                }
            }
        }
        for id in &self.matcher.unanchored {
            hits[*id as usize] = (0..changes.len()).map(|index| (index, true, true)).collect();
        }
        // The work: each affected subscription with its hits, in change order.
        let mut work: Vec<(&mut QuerySub<T>, Vec<Hit>)> = Vec::with_capacity(hits.len());
        for (sub, list) in self.queries.iter_mut().zip(hits) {
            let (Some(sub), mut list) = (sub.as_mut(), list) else { continue };
            if list.is_empty() || batch.sequence <= sub.since {
                continue;
            }
            // Several anchors (an `or`) can list a change twice.
            list.sort_unstable_by_key(|hit| hit.0);
            list.dedup_by(|later, earlier| {
                if later.0 == earlier.0 {
                    earlier.1 |= later.1;
                    earlier.2 |= later.2;
                    true
                } else {
                    false
                }
            });
            work.push((sub, list));
        }
        let mut sort_keys: HashMap<String, SortKeys> = HashMap::new();
        for (sub, _) in &work {
            sort_keys
                .entry(sub.orders_signature.clone())
                .or_insert_with(|| (0..changes.len()).map(|_| std::sync::OnceLock::new()).collect());
        }
        let commit = Commit { sequence: batch.sequence, changes: &changes, values: &values, db, state: &self.state };
        let run = |work: &mut [(&mut QuerySub<T>, Vec<Hit>)]| {
            for (sub, list) in work.iter_mut() {
                let Some(mailbox) = sub.mailbox.upgrade() else { continue };
                let sort_keys = &sort_keys[&sub.orders_signature];
                match sub.apply(&commit, list, sort_keys) {
                    Ok(Some(change)) => mailbox.push(change),
                    Ok(None) => {}
                    // The subscription cannot follow (a record that does not decode): end it.
                    Err(_) => mailbox.end(),
                }
            }
        };
        // A large commit is split between two threads: the feed thread and one helper.
        let cost = |list: &Vec<Hit>| list.len() + SUBSCRIPTION_COST_IN_PAIRS;
        let total: usize = work.iter().map(|(_, list)| cost(list)).sum();
        if total >= PARALLEL_PAIRS_MIN && work.len() > 1 {
            let mut half = 0;
            let mut counted = 0;
            while half < work.len() && counted * 2 < total {
                counted += cost(&work[half].1);
                half += 1;
            }
            let (first, second) = work.split_at_mut(half);
            std::thread::scope(|scope| {
                scope.spawn(|| run(second));
                run(first);
            });
        } else {
            run(&mut work);
        }
        removed
    }
}

/// All live subscriptions of one database, fed by a hook on its change feed.
pub(crate) struct Engine {
    collections: Mutex<HashMap<String, Box<dyn AnyLive>>>,
    db: WeakDb,
}

const ENGINE_STATE_KEY: &str = "live";

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl Engine {
    fn of(db: &Db) -> Result<Arc<Engine>> {
        db.shared_state_or(
            ENGINE_STATE_KEY,
            |_: &Engine| true,
            || {
                let engine = Arc::new(Engine { collections: Mutex::new(HashMap::new()), db: db.downgrade() });
                let hook_engine = engine.clone();
                db.add_feed_hook(Arc::new(move |batch: &Arc<ChangeBatch>| hook_engine.apply(batch)));
                Ok(engine)
            },
        )
    }

    fn apply(&self, batch: &Arc<ChangeBatch>) {
        let Some(db) = self.db.upgrade() else { return };
        let mut collections = lock(&self.collections);
        for live in collections.values_mut() {
            live.apply(batch, &db); // a pruned subscription's demand guard lowers the demand
        }
    }

    /// Runs `register` on the collection's registry with the writer barrier passed: from now on
    /// every commit is recorded and reaches the registry after what `register` read. `register`
    /// gets the subscription's demand guard to keep (a refused registration drops it).
    fn register<T: Record>(
        &self,
        db: &Db,
        state: &Arc<CollectionState>,
        register: impl FnOnce(&mut LiveCollection<T>, ChangeDemand) -> Result<()>,
    ) -> Result<()> {
        // Ask writers to record changes, then wait out a transaction that began without.
        let demand = db.demand_changes();
        db.wait_for_writers()?;
        let mut collections = lock(&self.collections);
        let live = collections.entry(state.name.clone()).or_insert_with(|| {
            Box::new(LiveCollection::<T> {
                state: state.clone(),
                objects: rustc_hash::FxHashMap::default(),
                queries: Vec::new(),
                free_slots: Vec::new(),
                matcher: Matcher::default(),
            })
        });
        match live.as_any().downcast_mut::<LiveCollection<T>>() {
            Some(live) => register(live, demand),
            None => Err(crate::Error::SchemaMismatch {
                collection: state.name.clone(),
                reason: "subscribed with two different record types".into(),
            }),
        }
    }
}

impl<T: Record> Collection<T> {
    /// Subscribes to the record at `key`: [`ObjectChange::Updated`] after every commit that
    /// changes it, [`ObjectChange::Deleted`] when it is removed.
    pub fn subscribe_object<Q>(&self, key: &Q) -> Result<ObjectSubscription<T>>
    where
        T::Key: std::borrow::Borrow<Q>,
        Q: crate::store::key::KeyPart + ?Sized,
    {
        self.subscribe_object_with(key, Policy::EveryChange)
    }

    /// [`Collection::subscribe_object`] with a delivery policy.
    pub fn subscribe_object_with<Q>(&self, key: &Q, policy: Policy) -> Result<ObjectSubscription<T>>
    where
        T::Key: std::borrow::Borrow<Q>,
        Q: crate::store::key::KeyPart + ?Sized,
    {
        let mut encoded = Vec::new();
        key.encode_key(&mut encoded);
        let mailbox = Arc::new(Mailbox::new(policy));
        let engine = Engine::of(&self.db)?;
        engine.register::<T>(&self.db, &self.state, |live, demand| {
            let since = self.db.read_txn()?.sequence();
            let sub = ObjectSub { mailbox: Arc::downgrade(&mailbox), since, _demand: demand };
            live.objects.entry(encoded.into_boxed_slice()).or_default().push(sub);
            Ok(())
        })?;
        Ok(ObjectSubscription::new(mailbox))
    }

    /// Subscribes to a query: the current result first, then one [`ResultChange`] per commit
    /// that changes it. The query is type-checked now: a bad one is an error here.
    pub fn subscribe_query(&self, query: &Query<T>) -> Result<QuerySubscription<T>> {
        self.subscribe_query_with(query, Policy::EveryChange)
    }

    /// [`Collection::subscribe_query`] with a delivery policy.
    pub fn subscribe_query_with(&self, query: &Query<T>, policy: Policy) -> Result<QuerySubscription<T>> {
        query.explain()?; // type-checks
        let parts = query.parts();
        let anchoring = matcher::anchoring(&self.state.shape, parts.predicate.as_deref());
        let orders = parts.orders.iter().map(|(path, order)| (FieldPath::new(path), *order == Order::Desc)).collect();
        let orders_signature = format!("{:?}", parts.orders);
        let mailbox = Arc::new(Mailbox::new(policy));
        let engine = Engine::of(&self.db)?;
        engine.register::<T>(&self.db, &self.state, |live, demand| {
            let mut sub = QuerySub {
                parts,
                orders,
                orders_signature,
                anchors: anchoring.anchors,
                exact: anchoring.exact,
                entries: Vec::new(),
                complete: true,
                since: 0,
                policy,
                mailbox: Arc::downgrade(&mailbox),
                _demand: demand,
            };
            sub.load(&self.db, &self.state)?;
            let keys = (policy == Policy::LatestOnly).then(|| {
                let new = sub.keys_of(sub.visible());
                Box::new(CoalesceKeys { base: Vec::new(), new, modified: HashSet::new() })
            });
            let first = sub.change(0, (Vec::new(), (0..sub.visible().len()).collect(), Vec::new(), Vec::new()), keys);
            mailbox.push(first);
            let slot = live.free_slots.pop().unwrap_or_else(|| {
                live.queries.push(None);
                live.queries.len() - 1
            });
            live.matcher.add(slot as u64, &sub.anchors);
            live.queries[slot] = Some(sub);
            Ok(())
        })?;
        Ok(QuerySubscription::new(mailbox))
    }
}

#[cfg(test)]
mod tests {
    use crate::collection::Record;

    #[derive(Record, Debug, Clone, PartialEq)]
    #[record(name = "counted")]
    struct Counted {
        #[record(key)]
        id: u32,
        n: i64,
    }

    #[test]
    fn writers_record_changes_exactly_while_a_subscription_is_registered() {
        // Each registered subscription holds one demand guard: a refused registration, a
        // subscription dropped (pruned at the next commit) and the last one gone each leave
        // the demand where it should be, so writers stop copying old values for nobody.
        let dir = tempfile::tempdir().unwrap();
        let db = crate::Db::open(dir.path().join("db")).unwrap();
        let counted = db.collection::<Counted>().unwrap();
        let write = |n: i64| db.write(|tx| counted.upsert(tx, &Counted { id: 1, n }).map(drop)).unwrap();
        assert!(!db.records_changes());
        // Subscribing inside a write transaction is refused after the demand was raised.
        db.write(|_| {
            assert!(matches!(counted.subscribe_object(&1u32), Err(crate::Error::WouldDeadlock { .. })));
            Ok(())
        })
        .unwrap();
        assert!(!db.records_changes(), "a refused subscription left its demand behind");
        let object = counted.subscribe_object(&1u32).unwrap();
        let query = counted.subscribe_query(&counted.filter(Counted::n().gt(0))).unwrap();
        assert!(db.records_changes());
        write(1);
        drop(object);
        write(2); // prunes the object subscription; the query's still demands
        assert!(db.records_changes());
        drop(query);
        write(3); // prunes the last one
        assert!(!db.records_changes());
    }
}
