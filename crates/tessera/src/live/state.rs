//! One query subscription's state: its result's rows in order (sort keys only, see
//! [`super::rows`]), kept current commit by commit by merging the changed records' sort keys,
//! with the changeset computed in the same pass.
//!
//! The records a delivery carries come from the commit's batch for rows the commit changed
//! (each decoded once per commit), from the previous delivery for rows it did not, and from
//! storage only when the subscriber has dropped the previous delivery: the engine keeps no
//! decoded record of its own, so a result's memory is the subscriber's copy.

use super::changeset::{CoalesceKeys, Diff, ResultChange, diff_by_key, heaviest_increasing_run};
use super::event::QueryMailbox;
use super::hits::SubHits;
use super::mailbox::Policy;
use super::matcher::Anchor;
use super::record::{self, LiveRecord};
use super::results::{LastDelivery, Results, Vector, vector_of};
use super::rows::Rows;
use crate::Db;
use crate::collection::{CollectionState, QueryParts, sort_key};
use crate::error::Result;
use crate::query::Truth;
use crate::store::{ChangeDemand, ChangeView, ReadSource};
use smallvec::SmallVec;
use std::collections::HashSet;
use std::sync::{Arc, OnceLock, Weak};

/// Where a row of a merged result came from.
#[derive(Clone, Copy)]
pub(super) enum Origin {
    /// It stayed, at this old position.
    Kept(usize),
    /// It is the new version `change` brought: of a record that was at `moved_from`, or of one
    /// new to the result.
    New { moved_from: Option<usize>, change: usize },
}

pub(super) struct QuerySub<T> {
    pub(super) parts: QueryParts,
    pub(super) orders: Vec<sort_key::SortField>,
    /// The order as text, interned per collection (`LiveCollection::intern_orders`):
    /// subscriptions with equal orders hold one string, and share sort keys by its address.
    pub(super) orders_signature: Arc<str>,
    pub(super) anchors: Vec<Anchor>,
    pub(super) exact: bool,
    /// The result's sort keys, in order (the whole window from 0, not cut by the offset).
    pub(super) rows: Rows,
    /// The last result delivered, while the subscriber (or its mailbox) still holds it: the
    /// records of the visible rows as of `since`.
    pub(super) delivered: LastDelivery<T>,
    /// `rows` holds every match (not cut by the limit).
    pub(super) complete: bool,
    pub(super) since: u64,
    pub(super) policy: Policy,
    pub(super) mailbox: Weak<QueryMailbox<T>>,
    /// Keeps writers recording changes while the subscription is registered.
    pub(super) _demand: ChangeDemand,
}

/// Writes the sort key of a stored record for a query's order into `out` (cleared first);
/// returns where the primary key starts in it.
fn write_sort_key(orders: &[sort_key::SortField], state: &CollectionState, bytes: &[u8], key: &[u8], out: &mut Vec<u8>) -> usize {
    out.clear();
    let doc = if orders.is_empty() { None } else { state.open_stored(bytes).ok() };
    sort_key::encode_record(orders, doc.map(|doc| doc.root()), key, out);
    out.len() - key.len() // the primary key is the tail
}

/// The sort key of a stored record for a query's order.
pub(super) fn sort_key_of(orders: &[sort_key::SortField], state: &CollectionState, bytes: &[u8], key: &[u8]) -> SortKey {
    let mut out = Vec::with_capacity(key.len() + 18 * orders.len());
    let key_start = write_sort_key(orders, state, bytes, key, &mut out);
    (Arc::from(out), key_start)
}

/// A sort key and where the primary key starts in it.
pub(super) type SortKey = (Arc<[u8]>, usize);

/// A subscription's old versions to find must be at least this share of the commit's changes
/// (one in this many) for the commit's old versions to be ranked for it: ranking sorts every
/// change's old sort key once per commit, which a few rows in a large commit do not repay.
const RANKED_SHARE_MIN_DENOMINATOR: usize = 16;

/// A change's old and new version's sort keys, for the versions that exist.
type VersionKeys = (Option<SortKey>, Option<SortKey>);

/// The sort keys of a commit's changes for one order, each computed once per commit
/// (subscriptions with the same `order by` share them, on both threads).
pub(super) struct SortKeys {
    /// By change index.
    versions: Vec<OnceLock<VersionKeys>>,
    /// Each change's old version's place among the old versions of every change of the commit,
    /// in this order (`u32::MAX`: no old version); made when a subscription first needs many
    /// of its rows' positions (see [`QuerySub::positions`]).
    old_ranks: OnceLock<Vec<u32>>,
}

impl SortKeys {
    /// None computed yet, for a commit of `changes` changes.
    pub(super) fn new(changes: usize) -> SortKeys {
        SortKeys { versions: (0..changes).map(|_| OnceLock::new()).collect(), old_ranks: OnceLock::new() }
    }
}

/// The primary keys of `rows` in `range`.
fn keys_of(rows: &Rows, range: std::ops::Range<usize>) -> Vec<Box<[u8]>> {
    rows.keys(range)
}

/// What merging a commit's changes into a result needs to know about each old row.
struct Marks<'m> {
    /// Rows the commit removed (or moved).
    removed: &'m [bool],
    /// Rows changed in place (same position): the change that did.
    rewritten: &'m [Option<usize>],
}

/// A row a commit inserts into a result: its sort key, the old position of a record that
/// moved, and its change's index.
type Inserted<'k> = (&'k SortKey, Option<usize>, usize);

/// Merges the surviving `old` rows with `inserted` (sorted by sort key); returns the merged
/// rows, and sets `origin` (cleared first) to where each came from.
fn merge(old: &Rows, marks: &Marks<'_>, inserted: &[Inserted<'_>], origin: &mut RowScratch<Origin>) -> Rows {
    let removed_count = marks.removed.iter().filter(|removed| **removed).count();
    let rows_count = old.len() - removed_count + inserted.len();
    origin.clear();
    origin.reserve(rows_count);
    if removed_count == old.len() {
        // Every old row goes (the live table's case 3): the result is the inserted rows.
        origin.extend(inserted.iter().map(|(_, moved_from, change)| Origin::New { moved_from: *moved_from, change: *change }));
        return old.sorted_like(inserted.iter().map(|(sort, ..)| (&sort.0[..], sort.1)));
    }
    let inserted_bytes: usize = inserted.iter().map(|(sort, ..)| sort.0.len() + 4).sum();
    let mut merged = old.with_capacity_like(old.bytes_len() + inserted_bytes);
    let mut next = inserted.iter().peekable();
    let mut cursor = old.cursor();
    loop {
        // A block whose every row goes is passed over unread (a commit that changes every row
        // of a result, as the live table's case 3 does, reads none of the old rows).
        if cursor.skip_block_if(|block| marks.removed[block].iter().all(|removed| *removed)) {
            continue;
        }
        if !cursor.advance() {
            break;
        }
        let position = cursor.index();
        if marks.removed[position] {
            continue;
        }
        let sort = cursor.sort();
        while let Some((new_sort, moved_from, change)) = next.next_if(|(new_sort, ..)| sort_key::compare(&new_sort.0, sort).is_lt()) {
            merged.push(&new_sort.0, new_sort.1);
            origin.push(Origin::New { moved_from: *moved_from, change: *change });
        }
        merged.push(sort, cursor.key_start());
        origin.push(Origin::Kept(position));
    }
    for (new_sort, moved_from, change) in next {
        merged.push(&new_sort.0, new_sort.1);
        origin.push(Origin::New { moved_from: *moved_from, change: *change });
    }
    assert_eq!(merged.len(), rows_count, "every surviving and inserted row, once");
    merged
}

/// The buffers one thread reuses while it updates a commit's subscriptions one after another,
/// each cleared before use, so that updating a subscription allocates only what outlives the
/// update: its new rows, and the changeset and result it delivers. Made afresh for each commit
/// (they borrow its sort keys). In the live table's case 3 (1,000 subscriptions of about 1,000
/// rows, every row changed), these were a dozen allocations of up to 40 KiB for each
/// subscription, and the allocator's work and fresh pages cost more than the merges.
#[derive(Default)]
pub(super) struct Scratch<'k> {
    removed: RowScratch<bool>,
    rewritten: RowScratch<Option<usize>>,
    relevant: RowScratch<Relevant<'k>>,
    /// The sort of old versions' sort keys in [`QuerySub::positions`]: their slots in
    /// `relevant` in sort-key order, and their sort keys in that order; `keyed_slots` for a
    /// sort of the subscription's own.
    order: Vec<usize>,
    keyed_slots: Vec<u128>,
    sorts: Vec<&'k [u8]>,
    /// [`QuerySub::positions`]' bitmap over the commit's old-version ranks, all zero between
    /// uses, and the slot in `relevant` of each rank set in it.
    ranks_present: Vec<u64>,
    slot_of_rank: Vec<u32>,
    positions: RowScratch<Option<usize>>,
    inserted: RowScratch<Inserted<'k>>,
    origin: RowScratch<Origin>,
    accounted: RowScratch<bool>,
    /// A changeset's insertions and modifications, copied out at their exact length.
    insertions: Vec<usize>,
    modifications: Vec<usize>,
}

/// Sorts `entries`, each an id below a sort key's head (`head << 64 | id`), into the order of
/// the sort keys (`bytes(id)`): as integers, most keys differing in their heads, then each run
/// of equal heads by the bytes.
fn sort_by_key_bytes<'b>(entries: &mut [u128], bytes: impl Fn(usize) -> &'b [u8]) {
    entries.sort_unstable();
    for run in entries.chunk_by_mut(|a, b| a >> 64 == b >> 64).filter(|run| run.len() > 1) {
        run.sort_unstable_by(|a, b| sort_key::compare(bytes(id_of(*a)), bytes(id_of(*b))));
    }
}

/// An id below a sort key's head, for [`sort_by_key_bytes`].
fn keyed(sort: &[u8], id: usize) -> u128 {
    (u128::from(sort_key::head(sort)) << 64) | id as u128
}

/// The id of an entry made by [`keyed`].
fn id_of(entry: u128) -> usize {
    entry as u64 as usize
}

/// `buffer` cleared and filled with `len` copies of `value`, its allocation kept.
fn refill<T: Clone>(buffer: &mut RowScratch<T>, len: usize, value: T) {
    buffer.clear();
    buffer.resize(len, value);
}

impl<T: LiveRecord> QuerySub<T> {
    /// A change's old and new version's sort keys in this subscription's order.
    fn version_keys(&self, change: &ChangeView<'_>, state: &CollectionState) -> VersionKeys {
        if self.orders.is_empty() {
            // Without an order, a sort key is the primary key, which both versions share: one
            // allocation per change instead of two for each version.
            let key: SortKey = (Arc::from(change.key), 0);
            return (change.old.map(|_| key.clone()), change.new.map(|_| key));
        }
        let of = |bytes: Option<&[u8]>| bytes.map(|bytes| sort_key_of(&self.orders, state, bytes, change.key));
        (of(change.old), of(change.new))
    }

    /// The ranks of the commit's old versions in this subscription's order (see
    /// [`SortKeys::old_ranks`]): one sort of the commit's old sort keys, shared by every
    /// subscription with this order.
    fn old_ranks<'k>(&self, commit: &Commit<'_, T>, sort_keys: &'k SortKeys) -> &'k [u32] {
        sort_keys.old_ranks.get_or_init(|| {
            let changes = commit.changes;
            let old_key = |index: usize| {
                let (old, _) = sort_keys.versions[index].get_or_init(|| self.version_keys(&changes[index], commit.state));
                old.as_ref().map(|(sort, _)| &sort[..])
            };
            let mut order: Vec<u128> = (0..changes.len()).filter_map(|index| old_key(index).map(|sort| keyed(sort, index))).collect();
            sort_by_key_bytes(&mut order, |index| old_key(index).expect("only old versions are ranked"));
            let mut ranks = vec![u32::MAX; changes.len()];
            for (rank, entry) in order.iter().enumerate() {
                ranks[id_of(*entry)] = u32::try_from(rank).expect("a commit's changes are fewer than Hit::CHANGES_MAX");
            }
            ranks
        })
    }

    /// Sets `scratch.positions` to where each of `scratch.relevant`'s old versions is among
    /// the rows (`None`: not a row): a search for each of a few, one walk of the rows for many,
    /// their old sort keys put in order by a sort of their own, or, when they are a good share
    /// of the commit's changes (or the ranks exist), taken in order from a bitmap over the
    /// commit's old-version ranks.
    fn positions<'k>(&self, commit: &Commit<'_, T>, sort_keys: &'k SortKeys, scratch: &mut Scratch<'k>) {
        let Scratch { relevant, order, keyed_slots, sorts, positions, ranks_present, slot_of_rank, .. } = scratch;
        positions.clear();
        let lookups = relevant.iter().filter(|(_, old, _)| old.is_some()).count();
        // A search costs about as much as a dozen rows of a walk (callgrind, live table case 3).
        if lookups < 2 || lookups * 12 < self.rows.len() {
            positions.extend(relevant.iter().map(|(_, old, _)| old.and_then(|(sort, _)| self.rows.search(sort).ok())));
            return;
        }
        let old_sort = |slot: usize| &relevant[slot].1.expect("an old version").0[..];
        order.clear();
        sorts.clear();
        let ranked = sort_keys.old_ranks.get().is_some() || lookups * RANKED_SHARE_MIN_DENOMINATOR >= commit.changes.len();
        if ranked {
            let ranks = self.old_ranks(commit, sort_keys);
            ranks_present.resize(ranks.len().div_ceil(64), 0);
            slot_of_rank.resize(ranks.len(), 0);
            for (slot, (index, old, _)) in relevant.iter().enumerate() {
                if old.is_some() {
                    let rank = ranks[*index] as usize;
                    assert!(rank < ranks.len(), "a change with an old version has its rank");
                    debug_assert!(ranks_present[rank / 64] & (1 << (rank % 64)) == 0, "a subscription's hits name each change once");
                    ranks_present[rank / 64] |= 1 << (rank % 64);
                    slot_of_rank[rank] = slot as u32;
                }
            }
            for (word_index, word) in ranks_present.iter_mut().enumerate() {
                let mut bits = std::mem::take(word); // left at zero for the next use
                while bits != 0 {
                    order.push(slot_of_rank[word_index * 64 + bits.trailing_zeros() as usize] as usize);
                    bits &= bits - 1;
                }
            }
        } else {
            // Ranking every change of a large commit for a few rows would cost more than it saves.
            keyed_slots.clear();
            keyed_slots.extend(relevant.iter().enumerate().filter_map(|(slot, (_, old, _))| old.map(|(sort, _)| keyed(sort, slot))));
            sort_by_key_bytes(keyed_slots, old_sort);
            order.extend(keyed_slots.iter().map(|entry| id_of(*entry)));
        }
        sorts.extend(order.iter().map(|slot| old_sort(*slot)));
        positions.resize(relevant.len(), None);
        if self.rewritten_whole(sorts) {
            // Every row's old version is among them: the i-th in order is row i. A commit that
            // changes every row of a result (the live table's case 3) walks none of them.
            for (position, slot) in order.iter().enumerate() {
                positions[*slot] = Some(position);
            }
            debug_assert!(
                {
                    let mut found = vec![None; sorts.len()];
                    self.rows.find_sorted(sorts, |probe, position| found[probe] = Some(position));
                    found.iter().enumerate().all(|(probe, position)| *position == Some(probe))
                },
                "the old versions of a result rewritten whole are its rows, in order"
            );
            return;
        }
        self.rows.find_sorted(sorts, |probe, position| positions[order[probe]] = Some(position));
    }

    /// Whether `sorts` (the old sort keys of a commit's changes whose old version matched,
    /// ascending, each once) are exactly the rows. The rows are the first records in order of
    /// those that matched before the commit (all of them, or as many as the limit keeps), and
    /// each of `sorts` matched: so when they are as many as the rows and the last of them is
    /// the last row, none lies past the rows, and they are the rows.
    fn rewritten_whole(&self, sorts: &[&[u8]]) -> bool {
        sorts.len() == self.rows.len() && self.rows.last() == sorts.last().copied()
    }

    pub(super) fn window_end(&self) -> usize {
        self.parts.limit.map_or(usize::MAX, |limit| self.parts.offset.saturating_add(limit))
    }

    pub(super) fn visible(&self) -> std::ops::Range<usize> {
        let start = self.parts.offset.min(self.rows.len());
        start..self.rows.len().min(self.window_end())
    }

    pub(super) fn matches(&self, state: &CollectionState, bytes: Option<&[u8]>) -> bool {
        let Some(bytes) = bytes else { return false };
        match &self.parts.predicate {
            None => true,
            Some(predicate) => state.open_stored(bytes).is_ok_and(|doc| predicate.eval(doc.root()) == Truth::True),
        }
    }

    /// Reads the result from storage (at subscribe time, and to refill a limited result);
    /// returns the visible rows' records.
    pub(super) fn load(&mut self, db: &Db, state: &Arc<CollectionState>, keys: &T::Keys) -> Result<Vec<Arc<T>>> {
        let mut parts = self.parts.clone();
        parts.offset = 0;
        parts.limit = self.parts.limit.map(|_| self.window_end());
        let (sequence, found) =
            db.with_snapshot(|snapshot| Ok((snapshot.view_sequence(), record::entries::<T>(state, keys, &parts, snapshot)?)))?;
        let mut sort = Vec::new();
        let mut rows = self.rows.with_capacity_like(found.iter().map(|(key, _)| key.len() + 3).sum());
        let visible_start = self.parts.offset.min(found.len());
        let mut values = Vec::with_capacity(found.len() - visible_start);
        for (position, (key, bytes)) in found.iter().enumerate() {
            if position >= visible_start {
                values.push(Arc::new(T::decode_stored(state, key, bytes)?));
            }
            let key_start = write_sort_key(&self.orders, state, bytes, key, &mut sort);
            rows.push(&sort, key_start);
        }
        rows.shrink_to_fit();
        self.complete = rows.len() < self.window_end();
        self.rows = rows;
        self.since = sequence;
        Ok(values)
    }

    /// Hands out `values` as the delivered result, remembering it for the next commit.
    pub(super) fn deliver(&mut self, values: Vector<T>) -> Results<T> {
        debug_assert_eq!(values.len(), self.visible().len(), "a record for each visible row");
        self.delivered.deliver(values)
    }

    fn change(&mut self, base_len: usize, diff: Diff, keys: Option<Box<CoalesceKeys>>, values: Vector<T>) -> ResultChange<T> {
        let (deletions, insertions, modifications, moves) = diff;
        let result = self.deliver(values);
        ResultChange { sequence: self.since, result, deletions, insertions, modifications, moves, resynced: false, base_len, keys }
    }

    /// The changeset from the previous visible rows (`old_keys`) to a result just loaded with
    /// `values` (a refill, or a read past a commit), diffed by primary key.
    fn reloaded(&mut self, commit: &Commit<'_, T>, old_keys: Vec<Box<[u8]>>, values: Vec<Arc<T>>) -> Option<ResultChange<T>> {
        let new_keys = keys_of(&self.rows, self.visible());
        let mut modified: HashSet<Box<[u8]>> = commit.changes.iter().map(|c| Box::from(c.key)).collect();
        if self.since > commit.sequence {
            // The snapshot read holds later commits too, whose own changes will be skipped
            // as already included: any record of the window may have changed in place, so
            // each counts as modified (one reported modified needlessly is redrawn; one
            // changed but not reported would keep a stale value in the subscriber's view).
            modified.extend(new_keys.iter().cloned());
        }
        let diff = diff_by_key(&old_keys, &new_keys, &modified);
        if diff.0.is_empty() && diff.1.is_empty() && diff.2.is_empty() && diff.3.is_empty() {
            return None; // later commits undid what this one changed in the window
        }
        let base_len = old_keys.len();
        let keys = (self.policy == Policy::LatestOnly).then(|| Box::new(CoalesceKeys { base: old_keys, new: new_keys, modified }));
        Some(self.change(base_len, diff, keys, vector_of(values)))
    }

    /// The records of the visible rows after a merge: from the commit's batch, the previous
    /// delivery (`previous`, of `old_visible`) or storage; `None` when storage is already past
    /// this commit (its records could be newer than the changeset says).
    fn visible_values(
        &self,
        commit: &Commit<'_, T>,
        origin: &[Origin],
        rewritten: &[Option<usize>],
        rewritten_only: bool,
        old_visible: std::ops::Range<usize>,
    ) -> Result<Option<Vector<T>>> {
        let new_visible = self.visible();
        // Rows only rewritten in place (`rewritten_only`: nothing removed or inserted, so every
        // row kept its position): the previous delivery with those rows replaced, O(log n)
        // each, every other node shared with it.
        if rewritten_only && let Some(mut rows) = self.delivered.rows() {
            debug_assert!(
                new_visible == old_visible && origin.iter().enumerate().all(|(at, o)| matches!(o, Origin::Kept(old) if *old == at))
            );
            assert_eq!(rows.len(), old_visible.len(), "the previous delivery holds the previous visible rows");
            for (relative, position) in new_visible.clone().enumerate() {
                if let Some(change) = rewritten[position] {
                    rows.set(relative, commit.values.get(change, commit.changes, commit.state)?);
                }
            }
            return Ok(Some(rows));
        }
        // The previous delivery, read through a focus: reading its rows in order costs what a
        // `Vec`'s did (an index into the tree costs about ten times more, 11 ns against 1).
        let previous = self.delivered.rows();
        let mut previous_rows = previous.as_ref().map(Vector::focus);
        let mut found: Vec<Option<Arc<T>>> = Vec::with_capacity(new_visible.len());
        let mut missing = Vec::new();
        for new_position in new_visible.clone() {
            let change = match origin[new_position] {
                Origin::New { change, .. } => Some(change),
                Origin::Kept(old_position) => rewritten[old_position],
            };
            let value = match (change, origin[new_position]) {
                (Some(change), _) => Some(commit.values.get(change, commit.changes, commit.state)?),
                (None, Origin::Kept(old_position)) if old_visible.contains(&old_position) => previous_rows.as_mut().map(|previous| {
                    assert_eq!(previous.len(), old_visible.len(), "the previous delivery holds the previous visible rows");
                    previous.index(old_position - old_visible.start).clone()
                }),
                (None, _) => None,
            };
            if value.is_none() {
                missing.push(found.len());
            }
            found.push(value);
        }
        if !missing.is_empty() {
            let state = commit.state;
            let read_at_commit = commit.db.with_snapshot(|snapshot| {
                if snapshot.view_sequence() != commit.sequence {
                    return Ok(false);
                }
                for &slot in &missing {
                    let key = self.rows.key(new_visible.start + slot);
                    let bytes = snapshot.get_value(&state.records, &key)?.ok_or_else(|| {
                        crate::Error::Corrupted(format!(
                            "collection {:?}: a live result's record {} is not stored",
                            state.name,
                            state.display_key(&key)
                        ))
                    })?;
                    found[slot] = Some(Arc::new(T::decode_stored(state, &key, bytes)?));
                }
                Ok(true)
            })?;
            if !read_at_commit {
                return Ok(None);
            }
        }
        Ok(Some(vector_of(found.into_iter().map(|value| value.expect("every visible row has its record")))))
    }

    /// The changeset of a commit that only appends rows after the last one (`inserted`, in
    /// order) to a result that is visible whole (no offset) and stays complete, with nothing
    /// rewritten in place, for a subscriber that takes every change: the new rows' positions,
    /// and the previous delivery's records followed by the new ones, without the per-row
    /// bookkeeping of a merge (a result that grows at its end, such as one in insertion order,
    /// then costs a commit what it adds: the new rows are pushed onto the previous delivery's
    /// persistent vector, which shares every other node). `None`, changing
    /// nothing, when the commit is not of that kind or the previous delivery is gone.
    fn appended_whole(&mut self, commit: &Commit<'_, T>, inserted: &[Inserted<'_>], marks: &Marks<'_>) -> Result<Option<ResultChange<T>>> {
        let old_len = self.rows.len();
        let fits = inserted.len() <= self.window_end().saturating_sub(old_len);
        if self.parts.offset != 0 || self.policy != Policy::EveryChange || !fits || marks.rewritten.iter().any(Option::is_some) {
            return Ok(None);
        }
        let Some(mut values) = self.delivered.rows().filter(|previous| previous.len() == old_len) else { return Ok(None) };
        debug_assert!(inserted.iter().all(|(_, moved_from, _)| moved_from.is_none()), "an appended row was not in the result");
        for &(_, _, change) in inserted {
            values.push_back(commit.values.get(change, commit.changes, commit.state)?);
        }
        for (sort, _, _) in inserted {
            self.rows.push(&sort.0, sort.1);
        }
        self.since = commit.sequence;
        let insertions = (old_len..self.rows.len()).collect();
        Ok(Some(self.change(old_len, (Vec::new(), insertions, Vec::new(), Vec::new()), None, values)))
    }

    /// Applies one commit's changes (`hits`: change index, old version anchored, new version
    /// anchored); returns the changeset, if the visible result changed. `scratch` is the
    /// calling thread's, for this commit.
    pub(super) fn apply<'k>(
        &mut self,
        commit: &Commit<'_, T>,
        hits: SubHits<'_>,
        sort_keys: &'k SortKeys,
        scratch: &mut Scratch<'k>,
    ) -> Result<Option<ResultChange<T>>> {
        let Commit { sequence, changes, state, .. } = *commit;
        let old_visible = self.visible();
        let boundary = (!self.complete).then(|| self.rows.last().map(<[u8]>::to_vec)).flatten();
        refill(&mut scratch.removed, self.rows.len(), false);
        refill(&mut scratch.rewritten, self.rows.len(), None);
        let mut any_rewritten_visible = false;
        // New versions to insert: sort key, the old position of a record that moves, change.
        scratch.inserted.clear();
        let mut any_removed = false;
        // The hits whose old or new version matches: change, old and new sort key (where
        // that version matches).
        scratch.relevant.clear();
        for hit in hits.iter() {
            let (index, old_hit, new_hit) = (hit.index(), hit.old(), hit.new_version());
            let change = &changes[index];
            let (old_match, new_match) =
                if self.exact { (old_hit, new_hit) } else { (self.matches(state, change.old), self.matches(state, change.new)) };
            if !old_match && !new_match {
                continue;
            }
            let (old_all, new_all) = sort_keys.versions[index].get_or_init(|| self.version_keys(change, state));
            scratch.relevant.push((index, old_all.as_ref().filter(|_| old_match), new_all.as_ref().filter(|_| new_match)));
        }
        self.positions(commit, sort_keys, scratch);
        for (&(index, old_sort, new_sort), &position) in scratch.relevant.iter().zip(&scratch.positions) {
            match (position, new_sort) {
                // Found by its old sort key, which the new one equals: it stays in place.
                (Some(position), Some((sort, _))) if old_sort.is_some_and(|(old_sort, _)| **old_sort == **sort) => {
                    scratch.rewritten[position] = Some(index);
                    any_rewritten_visible |= old_visible.contains(&position);
                }
                (position, new_sort) => {
                    if let Some(position) = position {
                        scratch.removed[position] = true;
                        any_removed = true;
                    }
                    if let Some(new_sort) = new_sort {
                        // Past the last record of an incomplete result, storage may hold
                        // records this one should follow: leave it to a refill.
                        if boundary.as_deref().is_some_and(|last| sort_key::compare(&new_sort.0, last).is_gt()) {
                            continue;
                        }
                        scratch.inserted.push((new_sort, position, index));
                    }
                }
            }
        }
        if !any_removed && scratch.inserted.is_empty() && !any_rewritten_visible {
            return Ok(None);
        }
        scratch.inserted.sort_by(|a, b| sort_key::compare(&a.0.0, &b.0.0));
        let Scratch { removed, rewritten, inserted, origin, .. } = scratch;
        let marks = Marks { removed, rewritten };
        // Rows only appended after the last one (a result in insertion order) are pushed onto
        // the buffer instead of merged into a new one: a commit costs what it adds, not the
        // whole result's sort keys again. The old rows stay a prefix, so their positions and
        // keys still hold.
        let appended = !any_removed
            && inserted.first().is_some_and(|(first, ..)| self.rows.last().is_none_or(|last| sort_key::compare(&first.0, last).is_gt()));
        if appended && let Some(change) = self.appended_whole(commit, inserted, &marks)? {
            return Ok(Some(change));
        }
        // Rows only rewritten in place keep their buffers: no merge, every row kept.
        origin.clear();
        let rewritten_only = !any_removed && inserted.is_empty();
        let old_rows = if rewritten_only {
            origin.extend((0..self.rows.len()).map(Origin::Kept));
            None
        } else if appended {
            origin.extend((0..self.rows.len()).map(Origin::Kept));
            let room = self.window_end().saturating_sub(self.rows.len());
            if inserted.len() > room {
                // Records were cut off by the limit: the result no longer holds every match.
                self.complete = false;
            }
            for (sort, moved_from, change) in inserted.iter().take(room) {
                self.rows.push(&sort.0, sort.1);
                origin.push(Origin::New { moved_from: *moved_from, change: *change });
            }
            None
        } else {
            let mut merged = merge(&self.rows, &marks, inserted, origin);
            if merged.len() > self.window_end() {
                // Records were cut off by the limit: the result no longer holds every match.
                self.complete = false;
                merged.truncate(self.window_end());
                merged.shrink_to_fit();
                origin.truncate(self.window_end());
            }
            Some(std::mem::replace(&mut self.rows, merged))
        };
        let origin = &scratch.origin[..];
        let old_keys = |rows: &Rows| keys_of(old_rows.as_ref().unwrap_or(rows), old_visible.clone());
        self.since = sequence;
        if self.rows.len() < self.window_end() && !self.complete {
            // The limited result shrank past what it held: read it again.
            let old_keys = old_keys(&self.rows);
            let values = self.load(commit.db, state, commit.keys)?;
            return Ok(self.reloaded(commit, old_keys, values));
        }
        // Changesets of the visible window, from the merge's record of origins.
        let new_visible = self.visible();
        refill(&mut scratch.accounted, old_visible.len(), false);
        let (accounted, insertions, modifications) = (&mut scratch.accounted, &mut scratch.insertions, &mut scratch.modifications);
        insertions.clear();
        modifications.clear();
        // The rows that stayed (old and new index in the window), in new order; while their old
        // indexes rise, none of them moved.
        let stayed_at = |new_position: usize| match origin[new_position] {
            Origin::Kept(old_position) | Origin::New { moved_from: Some(old_position), .. } if old_visible.contains(&old_position) => {
                Some((old_position - old_visible.start, new_position - new_visible.start))
            }
            _ => None,
        };
        let mut previous_from = None;
        let mut stayed_in_order = true;
        for new_position in new_visible.clone() {
            let relative = new_position - new_visible.start;
            match stayed_at(new_position) {
                Some((from, _)) => {
                    accounted[from] = true;
                    stayed_in_order &= previous_from.is_none_or(|previous| previous < from);
                    previous_from = Some(from);
                    let rekeyed = matches!(origin[new_position], Origin::New { .. });
                    if rekeyed || scratch.rewritten[from + old_visible.start].is_some() {
                        modifications.push(relative);
                    }
                }
                None => insertions.push(relative),
            }
        }
        let deletions: Vec<usize> = accounted.iter().enumerate().filter(|(_, done)| !**done).map(|(relative, _)| relative).collect();
        // Moves: the rows that stayed off the heaviest run of rising old indexes, where a row
        // whose sort key did not change outweighs every re-keyed one, so only re-keyed rows (all
        // of them modifications) are named, and only where the order among the rows that stayed
        // changed; a re-keyed row whose neighbours stayed its neighbours is a modification only
        // (as in a changeset computed by key, `diff_by_key`). A commit that re-keys every row of
        // a result and keeps their order (the live table's case 3) names none.
        let moves = if stayed_in_order {
            Vec::new()
        } else {
            let stayed: Vec<(usize, usize)> = new_visible.clone().filter_map(stayed_at).collect();
            let unchanged_key = |&(_, relative): &(usize, usize)| matches!(origin[new_visible.start + relative], Origin::Kept(_));
            let in_order = heaviest_increasing_run(&stayed, unchanged_key, old_visible.len());
            stayed.iter().zip(in_order).filter(|(_, ordered)| !ordered).map(|(pair, _)| *pair).collect()
        };
        if deletions.is_empty() && insertions.is_empty() && modifications.is_empty() && moves.is_empty() {
            return Ok(None);
        }
        let (insertions, modifications) = (insertions.to_vec(), modifications.to_vec());
        let Some(values) = self.visible_values(commit, origin, &scratch.rewritten, rewritten_only, old_visible.clone())? else {
            // Storage is past this commit and the previous delivery is gone: read the whole
            // result at the newer snapshot, as a refill does.
            let old_keys = old_keys(&self.rows);
            let values = self.load(commit.db, state, commit.keys)?;
            return Ok(self.reloaded(commit, old_keys, values));
        };
        let keys = (self.policy == Policy::LatestOnly).then(|| {
            let base = old_keys(&self.rows);
            let new = keys_of(&self.rows, self.visible());
            let modified = changes.iter().map(|c| Box::from(c.key)).collect();
            Box::new(CoalesceKeys { base, new, modified })
        });
        Ok(Some(self.change(old_visible.len(), (deletions, insertions, modifications, moves), keys, values)))
    }
}

/// A hit whose old or new version matches: change index, and the sort key of each version
/// that matches.
type Relevant<'k> = (usize, Option<&'k SortKey>, Option<&'k SortKey>);
/// Per-row scratch of one update, inline for small results (a query by key).
type RowScratch<T> = SmallVec<[T; 4]>;

/// One commit, as every subscription's update sees it.
pub(super) struct Commit<'c, T: LiveRecord> {
    pub(super) sequence: u64,
    pub(super) changes: &'c [ChangeView<'c>],
    pub(super) values: &'c Values<T>,
    pub(super) db: &'c Db,
    pub(super) state: &'c Arc<CollectionState>,
    /// The collection's key layout, for reading a result again.
    pub(super) keys: &'c T::Keys,
}

impl<T: LiveRecord> Clone for Commit<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T: LiveRecord> Copy for Commit<'_, T> {}

/// The changed records' new versions, decoded at most once per commit.
pub(super) struct Values<T> {
    pub(super) decoded: Vec<std::sync::OnceLock<Option<Arc<T>>>>,
}

impl<T: LiveRecord> Values<T> {
    pub(super) fn new(changes: usize) -> Self {
        Values { decoded: (0..changes).map(|_| std::sync::OnceLock::new()).collect() }
    }

    pub(super) fn get(&self, index: usize, changes: &[ChangeView<'_>], collection: &CollectionState) -> Result<Arc<T>> {
        if let Some(Some(value)) = self.decoded[index].get() {
            return Ok(value.clone()); // decoded for an earlier row: most rows of a large commit
        }
        let change = &changes[index];
        let value = self.decoded[index].get_or_init(|| {
            let bytes = change.new?;
            T::decode_stored(collection, change.key, bytes).ok().map(Arc::new)
        });
        value.clone().ok_or_else(|| match change.new {
            // The decode failed above; decoding again gives its error.
            Some(bytes) => T::decode_stored(collection, change.key, bytes).err().unwrap_or_else(|| {
                crate::Error::Corrupted(format!("collection {:?}: a record decoded once and failed once", collection.name))
            }),
            // Values are only asked for changes with a new version; say so if that ever breaks.
            None => crate::Error::Corrupted(format!("collection {:?}: a deleted record was asked for its value", collection.name)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{Marks, Origin, Rows, SortKey, merge};
    use smallvec::SmallVec;
    use std::sync::Arc;

    /// Row `n`'s sort key: an order part, then the key `k{n}`; the key's start.
    fn sort_key(n: u32) -> SortKey {
        let mut sort = vec![0x02];
        sort.extend_from_slice(&n.to_be_bytes());
        let key_start = sort.len();
        sort.extend_from_slice(format!("k{n}").as_bytes());
        (Arc::from(sort), key_start)
    }

    /// The rows' sort keys, read back in order.
    fn sorts_of(rows: &Rows) -> Vec<Vec<u8>> {
        let mut cursor = rows.cursor();
        let mut sorts = Vec::new();
        while cursor.advance() {
            sorts.push(cursor.sort().to_vec());
        }
        sorts
    }

    #[test]
    fn merging_gives_the_surviving_rows_and_the_inserted_ones_in_order_whatever_goes() {
        let mut next = crate::live::test_rng(0x9e37_79b9_7f4a_7c15u64);
        let mut origin = SmallVec::new();
        for rows_count in [0usize, 1, 15, 16, 17, 40, 64, 100] {
            // Old rows at even numbers; removal patterns: none, every row, whole blocks, a run
            // across blocks aligned to them, a run starting and ending inside blocks (a block
            // may be skipped only from its first row), and random rows.
            for pattern in 0..7 {
                let mut old = Rows::new(true);
                for row in 0..rows_count as u32 {
                    let (sort, key_start) = sort_key(2 * row);
                    old.push(&sort, key_start);
                }
                let removed: SmallVec<[bool; 4]> = (0..rows_count)
                    .map(|row| match pattern {
                        0 => false,
                        1 => true,
                        2 => (row / 16) % 2 == 0,
                        3 => (16..48).contains(&row),
                        4 => (5..40).contains(&row),
                        _ => !next().is_multiple_of(3),
                    })
                    .collect();
                let rewritten = vec![None; rows_count];
                let marks = Marks { removed: &removed, rewritten: &rewritten };
                // New rows at odd numbers, some of them.
                let inserted_sorts: Vec<SortKey> =
                    (0..rows_count as u32 + 3).filter(|_| next().is_multiple_of(2)).map(|row| sort_key(2 * row + 1)).collect();
                let inserted: Vec<(&SortKey, Option<usize>, usize)> =
                    inserted_sorts.iter().enumerate().map(|(change, sort)| (sort, None, change)).collect();
                // One buffer for every case, as a thread's scratch is: merging clears it first.
                let merged = merge(&old, &marks, &inserted, &mut origin);

                let mut expected: Vec<(Vec<u8>, String)> = (0..rows_count)
                    .filter(|row| !removed[*row])
                    .map(|row| (sort_key(2 * row as u32).0.to_vec(), format!("kept {row}")))
                    .chain(inserted_sorts.iter().enumerate().map(|(change, sort)| (sort.0.to_vec(), format!("new {change}"))))
                    .collect();
                expected.sort();
                let described: Vec<String> = origin
                    .iter()
                    .map(|origin| match origin {
                        Origin::Kept(row) => format!("kept {row}"),
                        Origin::New { change, .. } => format!("new {change}"),
                    })
                    .collect();
                let context = format!("{rows_count} rows, pattern {pattern}");
                assert_eq!(sorts_of(&merged), expected.iter().map(|(sort, _)| sort.clone()).collect::<Vec<_>>(), "{context}");
                assert_eq!(described, expected.iter().map(|(_, origin)| origin.clone()).collect::<Vec<_>>(), "{context}");
            }
        }
    }
}
