//! The engine: one hook on the database's change feed that dispatches each commit to the
//! subscriptions it may affect, collection by collection, and registers new ones.

use super::by_key::{KeyWakes, KeyWatchers};
use super::event::Event;
use super::hits::{GroupedHits, Hit, HitRuns, SubHits};
use super::mailbox::{SubscriptionEnd, Wakes};
use super::matcher::Matcher;
use super::record::LiveRecord;
use super::state::{Commit, QuerySub, Scratch, SortKeys, Values};
use super::watch::{AnyWatch, Watches};
use crate::Db;
use crate::collection::{CollectionState, SCHEMA_KEYSPACE, TypeDesc, sort_key};
use crate::error::Result;
use crate::query::FieldPath;
use crate::store::{ChangeDemand, ChangeView, Published, WeakDb};
use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// Work, in (subscription, change) pairs, from which a commit's updates are split over two
/// threads (a thread costs about as much as 1,000 pairs).
pub(super) const PARALLEL_PAIRS_MIN: usize = 20_000;
/// Changes of one commit from which matching them to query subscriptions is split over two
/// threads (matching a change against range anchors costs a few thousand instructions, and
/// starting a thread about what a hundred changes cost).
pub(super) const PARALLEL_MATCH_CHANGES_MIN: usize = 1_000;
/// What updating and delivering one subscription costs besides its pairs (a decode, a result
/// vector, a wake-up), in pairs.
pub(super) const SUBSCRIPTION_COST_IN_PAIRS: usize = 16;

/// Every live subscription of one collection.
pub(super) struct LiveCollection<T: LiveRecord> {
    pub(super) state: Arc<CollectionState>,
    /// The primary key's layout, for reading a result from storage (the latest registered
    /// subscription's: a dynamic handle may know key kinds an earlier one did not).
    pub(super) keys: T::Keys,
    /// Object subscriptions, and query subscriptions by key (see [`super::by_key`]), by stored
    /// primary key. Every change of a commit is looked up here, so the hash is Fx, not SipHash
    /// (a third of a 10,000-change commit's dispatch went to hashing). The table holds only
    /// subscribed keys, so keys crafted to collide can cost a lookup one more comparison each,
    /// never make the table degrade.
    pub(super) by_key: rustc_hash::FxHashMap<Box<[u8]>, KeyWatchers<T>>,
    /// Query subscriptions other than those by key, by slot; a slot's index is the
    /// subscription's id in the matcher.
    pub(super) queries: Vec<Option<QuerySub<T>>>,
    pub(super) free_slots: Vec<usize>,
    pub(super) matcher: Matcher,
    /// Query orders as text, each shared by the subscriptions with that order (see
    /// [`LiveCollection::intern_orders`]); entries whose subscriptions are gone go at a prune.
    pub(super) orders: rustc_hash::FxHashMap<String, Weak<str>>,
    /// Subscriptions whose handle was dropped since the last prune (each mailbox of this
    /// collection counts itself here when it goes): a commit scans for them only then, so its
    /// cost does not grow with the subscriptions it does not affect.
    pub(super) dropped: Arc<AtomicUsize>,
    /// A commit's hit count per query slot, zero between commits (see [`HitRuns`]). Kept from
    /// commit to commit, so that counting a hit is an index, not a hash lookup (a commit of
    /// case 3 in the live table finds 1.7 million).
    pub(super) hit_counts: Vec<usize>,
}

/// The registry goes with the database's change feed: every subscription still open then ends,
/// so that `recv` returns `None` instead of waiting for deliveries that cannot come.
impl<T: LiveRecord> Drop for LiveCollection<T> {
    fn drop(&mut self) {
        self.end_all(&SubscriptionEnd::DatabaseClosed);
    }
}

/// A collection's subscriptions, whatever the record type.
pub(super) trait AnyLive: Send {
    /// Applies a commit; returns how many dead subscriptions were removed.
    fn apply(&mut self, batch: &Published, db: &Db) -> usize;
    fn as_any(&mut self) -> &mut dyn Any;
    /// Ends every subscription with `end` (the first reason given is the one kept).
    fn end_all(&self, end: &SubscriptionEnd);
    /// The collection the subscriptions read, as they were made.
    fn state(&self) -> &CollectionState;
}

impl<T: LiveRecord> LiveCollection<T> {
    /// Ends every query subscription with `end`.
    fn end_all_queries(&self, end: &SubscriptionEnd) {
        for sub in self.queries.iter().flatten() {
            if let Some(mailbox) = sub.mailbox.upgrade() {
                mailbox.end_with(end.clone());
            }
        }
    }

    /// Drops subscriptions whose handle is gone; returns how many.
    pub(super) fn prune(&mut self) -> usize {
        if self.dropped.swap(0, Ordering::AcqRel) == 0 {
            return 0;
        }
        let mut removed = 0;
        self.by_key.retain(|_, watchers| {
            removed += watchers.prune();
            watchers.len() > 0
        });
        for slot in 0..self.queries.len() {
            if self.queries[slot].as_ref().is_some_and(|sub| sub.mailbox.strong_count() == 0)
                && let Some(sub) = self.queries[slot].take()
            {
                self.matcher.remove(slot as u64, &sub.anchors);
                self.free_slots.push(slot);
                removed += 1;
            }
        }
        self.orders.retain(|_, shared| shared.strong_count() > 0);
        removed
    }

    /// The one shared copy of an order's text: a commit computes sort keys once per distinct
    /// order, grouping subscriptions by the copy's address (no string hashed per subscription).
    pub(super) fn intern_orders(&mut self, signature: String) -> Arc<str> {
        if let Some(shared) = self.orders.get(&signature).and_then(Weak::upgrade) {
            return shared;
        }
        let shared: Arc<str> = Arc::from(signature.as_str());
        self.orders.insert(signature, Arc::downgrade(&shared));
        shared
    }
}

impl<T: LiveRecord> AnyLive for LiveCollection<T> {
    fn as_any(&mut self) -> &mut dyn Any {
        self
    }

    fn state(&self) -> &CollectionState {
        &self.state
    }

    fn end_all(&self, end: &SubscriptionEnd) {
        for watchers in self.by_key.values() {
            watchers.end_all(end);
        }
        self.end_all_queries(end);
    }

    fn apply(&mut self, batch: &Published, db: &Db) -> usize {
        let removed = self.prune();
        let records = self.state.records.name();
        let sequence = batch.sequence();
        // Woken in batches, all of them by the end of the walk (see `Wakes`).
        let mut key_wakes = KeyWakes::new();
        if self.queries.len() == self.free_slots.len() {
            // Subscriptions by key alone: each change is looked up as the walk meets it, and a
            // subscribed one decoded once, with no view of every change collected first (a
            // 10,000-change commit made and freed 720 KB for that) nor a decode table.
            if !self.by_key.is_empty() {
                batch.for_each_in(records, |change| {
                    let Some(watchers) = self.by_key.get_mut(change.key) else { return };
                    if !watchers.follows(sequence) {
                        return;
                    }
                    let record = match change.new {
                        Some(bytes) => T::decode_stored(&self.state, change.key, bytes).map(|value| Some(Arc::new(value))),
                        None => Ok(None),
                    };
                    watchers.deliver(change.key, sequence, record.map_err(Arc::new), &mut key_wakes);
                });
            }
            return removed;
        }
        let changes: Vec<ChangeView<'_>> = batch.changes_in(records);
        if changes.is_empty() {
            return removed;
        }
        let values = Values::new(changes.len());
        for (index, change) in changes.iter().enumerate() {
            let Some(watchers) = self.by_key.get_mut(change.key) else { continue };
            if !watchers.follows(sequence) {
                continue;
            }
            let record = match change.new {
                Some(_) => values.get(index, &changes, &self.state).map(Some).map_err(Arc::new),
                None => Ok(None),
            };
            watchers.deliver(change.key, sequence, record, &mut key_wakes);
        }
        key_wakes.wake_all();
        if changes.len() > Hit::CHANGES_MAX {
            // Beyond what a hit can number: end the query subscriptions rather than miss changes.
            let error = Arc::new(crate::Error::LimitExceeded {
                what: "changes of one commit to a collection with query subscriptions",
                limit: Hit::CHANGES_MAX as u64,
            });
            self.end_all_queries(&SubscriptionEnd::Failed(error));
            return removed;
        }
        // Which subscriptions each change may affect: (change, old version hit, new hit), by
        // subscription id; only affected subscriptions appear.
        self.matcher.prepare();
        if self.hit_counts.len() < self.queries.len() {
            self.hit_counts.resize(self.queries.len(), 0);
        }
        let fields: Vec<(FieldPath, &super::matcher::FieldIndex)> =
            self.matcher.fields().map(|(path, field)| (FieldPath::new(path), field)).collect();
        // A string primary key's sort key is its stored key behind the string tag: anchors on
        // it are matched without reading the records.
        let string_key = T::sole_key_field(&self.keys).filter(|field| matches!(self.state.shape.resolve(field), Some(TypeDesc::String)));
        let state = &self.state;
        // The hits of the changes in `range`, counted in `counts` (all zero, one per slot).
        let match_changes = |range: std::ops::Range<usize>, counts: &mut [usize]| {
            let mut runs = HitRuns::new(counts);
            let mut component = Vec::with_capacity(32);
            for (path, field) in &fields {
                let on_key = string_key.is_some_and(|key_field| **path == *key_field);
                for index in range.clone() {
                    let change = &changes[index];
                    if on_key {
                        // The old and new versions share the key, so one lookup marks both.
                        component.clear();
                        component.push(sort_key::TAG_STRING);
                        component.extend_from_slice(change.key);
                        let hit = Hit::new(index, change.old.is_some(), change.new.is_some());
                        field.lookup(&component, &mut |ids| runs.record(ids, hit));
                        continue;
                    }
                    for (bytes, is_new) in [(change.old, false), (change.new, true)] {
                        let Some(bytes) = bytes else { continue };
                        component.clear();
                        let Ok(doc) = state.open_stored(bytes) else { continue };
                        sort_key::encode_value(path.lookup(doc.root()), &mut component);
                        let hit = Hit::new(index, !is_new, is_new);
                        field.lookup(&component, &mut |ids| runs.record(ids, hit));
                    }
                }
            }
            runs.group()
        };
        // A large commit is matched on two threads, the later half of its changes by a helper
        // (each with its own counts), so that every subscription's hits are the first thread's
        // followed by the helper's.
        let (first, second) = if changes.len() >= PARALLEL_MATCH_CHANGES_MIN && !fields.is_empty() {
            let middle = changes.len() / 2;
            let mut helper_counts = vec![0; self.queries.len()];
            let counts = &mut self.hit_counts;
            std::thread::scope(|scope| {
                let helper = scope.spawn(|| match_changes(middle..changes.len(), &mut helper_counts));
                let first = match_changes(0..middle, counts);
                let second = helper.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                (first, Some(second))
            })
        } else {
            (match_changes(0..changes.len(), &mut self.hit_counts), None)
        };
        // Subscriptions without an anchor follow every change: one list that all of them share.
        let mut unanchored: Vec<u64> = self.matcher.unanchored.clone();
        unanchored.sort_unstable();
        let every_change: Vec<Hit> =
            if unanchored.is_empty() { Vec::new() } else { (0..changes.len()).map(|index| Hit::new(index, true, true)).collect() };
        // The work: each affected subscription with its hits, in change order, in slot order
        // (a subscription is anchored or not, so the two lists name different slots).
        let mut affected = GroupedHits::merged(&first, second.as_ref());
        if !unanchored.is_empty() {
            affected.extend(unanchored.iter().map(|id| (*id, SubHits(&every_change, &[]))));
            affected.sort_unstable_by_key(|(id, _)| *id);
        }
        let mut work: Vec<(&mut QuerySub<T>, SubHits<'_>)> = Vec::with_capacity(affected.len());
        let mut rest: &mut [Option<QuerySub<T>>] = &mut self.queries;
        let mut first_in_rest = 0;
        for (id, list) in affected {
            let slot = id as usize;
            debug_assert!(slot >= first_in_rest, "slots in increasing order, each once");
            let (_, from_slot) = std::mem::take(&mut rest).split_at_mut(slot - first_in_rest);
            let Some((sub, after)) = from_slot.split_first_mut() else { break };
            rest = after;
            first_in_rest = slot + 1;
            let Some(sub) = sub.as_mut() else { continue };
            if list.is_empty() || sequence <= sub.since {
                continue;
            }
            work.push((sub, list));
        }
        // Sort keys by order, the interned order text's address standing for the order.
        let order_of = |sub: &QuerySub<T>| sub.orders_signature.as_ptr() as usize;
        let mut sort_keys: rustc_hash::FxHashMap<usize, SortKeys> = rustc_hash::FxHashMap::default();
        for (sub, _) in &work {
            sort_keys.entry(order_of(sub)).or_insert_with(|| SortKeys::new(changes.len()));
        }
        let commit = Commit { sequence: batch.sequence(), changes: &changes, values: &values, db, state: &self.state, keys: &self.keys };
        let run = |work: &mut [(&mut QuerySub<T>, SubHits<'_>)], commit: Commit<'_, T>| {
            let mut scratch = Scratch::default();
            // Readers are woken in batches (dropped at the end: every one is woken).
            let mut wakes = Wakes::new();
            for (sub, list) in work.iter_mut() {
                let Some(mailbox) = sub.mailbox.upgrade() else { continue };
                if mailbox.is_ended() {
                    // Ended (a commit it could not follow may have left its rows half updated):
                    // updated no more, until its handle goes and a prune removes it.
                    continue;
                }
                let sort_keys = &sort_keys[&order_of(sub)];
                match sub.apply(&commit, *list, sort_keys, &mut scratch) {
                    Ok(Some(change)) => wakes.push(mailbox, Event::Changed(change)),
                    Ok(None) => {}
                    // The subscription cannot follow (a record that does not decode): end it.
                    Err(error) => mailbox.end_with(SubscriptionEnd::Failed(Arc::new(error))),
                }
                wakes.wake_if_due();
            }
        };
        // A large commit is split between two threads: the feed thread and one helper.
        let cost = |list: SubHits<'_>| list.len() + SUBSCRIPTION_COST_IN_PAIRS;
        let total: usize = work.iter().map(|(_, list)| cost(*list)).sum();
        if total >= PARALLEL_PAIRS_MIN && work.len() > 1 {
            let mut half = 0;
            let mut counted = 0;
            while half < work.len() && counted * 2 < total {
                counted += cost(work[half].1);
                half += 1;
            }
            let (first, second) = work.split_at_mut(half);
            // The helper decodes its own copies of the records it delivers: sharing one `Arc`
            // per record, the two threads' reference counts bounced between the cores.
            let helper_values = Values::new(changes.len());
            let helper_commit = Commit { values: &helper_values, ..commit };
            std::thread::scope(|scope| {
                scope.spawn(move || run(second, helper_commit));
                run(first, commit);
            });
        } else {
            run(&mut work, commit);
        }
        removed
    }
}

/// All live subscriptions of one database, fed by a hook on its change feed.
pub(crate) struct Engine {
    /// By collection name and the type records are delivered as: typed and dynamic
    /// subscriptions of one collection are kept apart, each decoding to its own type.
    collections: Mutex<HashMap<(String, TypeId), Box<dyn AnyLive>>>,
    /// Subscriptions to documents, their fields and dictionary keys. Lock order: after
    /// `collections` (a commit is applied to the collections, then to these).
    watches: Mutex<Watches>,
    db: WeakDb,
    /// The gap in other processes' commits that ended every subscription at a delivery, before
    /// it was reported: its report then ends nothing more (subscriptions made since read a
    /// snapshot after it). Lock order: before `collections`.
    gap_ended: Mutex<Option<Arc<crate::Error>>>,
}

pub(super) const ENGINE_STATE_KEY: &str = "live";

pub(super) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl Engine {
    pub(super) fn of(db: &Db) -> Result<Arc<Engine>> {
        db.shared_state_or(
            ENGINE_STATE_KEY,
            |_: &Engine| true,
            || {
                let engine = Arc::new(Engine {
                    collections: Mutex::new(HashMap::new()),
                    watches: Mutex::default(),
                    db: db.downgrade(),
                    gap_ended: Mutex::new(None),
                });
                let hook_engine = engine.clone();
                db.add_feed_hook(Arc::new(move |batch: &Published| hook_engine.apply(batch)));
                let gap_engine = engine.clone();
                db.add_gap_hook(Arc::new(move |error: &Arc<crate::Error>| {
                    let ended = lock(&gap_engine.gap_ended).take();
                    if !ended.is_some_and(|ended| Arc::ptr_eq(&ended, error)) {
                        gap_engine.end_all(error);
                    }
                }));
                Ok(engine)
            },
        )
    }

    pub(super) fn apply(&self, batch: &Published) {
        let Some(db) = self.db.upgrade() else { return };
        // Commits of other processes before this batch were lost, and the gap is not reported
        // yet (a delivery was under way when it was found): nothing computed without them may
        // reach a subscription, so all end now, as the report would end them.
        if let Some((after, error)) = db.unreported_cross_process_gap()
            && batch.sequence() > after
        {
            let mut ended = lock(&self.gap_ended);
            if !ended.as_ref().is_some_and(|ended| Arc::ptr_eq(ended, &error)) {
                self.end_all(&error);
                *ended = Some(error);
                return; // none is left to apply it to
            }
        }
        let mut collections = lock(&self.collections);
        // A commit that wrote a collection's schema (this process's or another's) may have
        // changed the shape its subscriptions decode and evaluate records by: those end,
        // before any change of that commit is delivered, and their registry goes.
        let schemas = batch.changes_in(SCHEMA_KEYSPACE);
        if !schemas.is_empty() {
            collections.retain(|_, live| {
                let state = live.state();
                let written = schemas.iter().filter(|change| change.key == state.name.as_bytes());
                match written.filter_map(|change| state.schema_written(change.new)).next() {
                    None => true,
                    Some(error) => {
                        live.end_all(&SubscriptionEnd::Failed(Arc::new(error)));
                        false
                    }
                }
            });
        }
        for live in collections.values_mut() {
            live.apply(batch, &db); // a pruned subscription's demand guard lowers the demand
        }
        lock(&self.watches).apply(batch, &db);
    }

    /// Ends every subscription with `error` and forgets them: commits of other processes were
    /// lost (see `store/cross_process.rs`), so none can follow on.
    pub(super) fn end_all(&self, error: &Arc<crate::Error>) {
        let end = SubscriptionEnd::Failed(error.clone());
        let collections = std::mem::take(&mut *lock(&self.collections));
        for live in collections.values() {
            live.end_all(&end);
        }
        drop(collections);
        let mut watches = std::mem::take(&mut *lock(&self.watches));
        for watch in &mut watches.0 {
            watch.close(end.clone());
        }
    }

    /// Registers the value subscription `register` makes, with the writer barrier passed (as
    /// [`Engine::register`]).
    pub(super) fn register_watch(&self, db: &Db, register: impl FnOnce(ChangeDemand) -> Result<Box<dyn AnyWatch>>) -> Result<()> {
        db.refuse_following_if_read_only("a live subscription")?;
        let demand = db.demand_changes();
        db.wait_for_writers()?;
        let mut watches = lock(&self.watches);
        let watch = register(demand)?;
        watches.0.push(watch);
        Ok(())
    }

    /// Runs `register` on the collection's registry with the writer barrier passed: from now on
    /// every commit is recorded and reaches the registry after what `register` read. `register`
    /// gets the subscription's demand guard to keep (a refused registration drops it). `keys`
    /// (the collection's key layout) replaces the one the registry held.
    pub(super) fn register<T: LiveRecord>(
        &self,
        db: &Db,
        state: &Arc<CollectionState>,
        keys: T::Keys,
        register: impl FnOnce(&mut LiveCollection<T>, ChangeDemand) -> Result<()>,
    ) -> Result<()> {
        db.refuse_following_if_read_only("a live subscription")?;
        // Ask writers to record changes, then wait out a transaction that began without.
        let demand = db.demand_changes();
        db.wait_for_writers()?;
        let mut collections = lock(&self.collections);
        let mut keys = Some(keys);
        let live = collections.entry((state.name.clone(), TypeId::of::<T>())).or_insert_with(|| {
            Box::new(LiveCollection::<T> {
                state: state.clone(),
                keys: keys.take().expect("the keys, once"),
                by_key: rustc_hash::FxHashMap::default(),
                queries: Vec::new(),
                free_slots: Vec::new(),
                matcher: Matcher::default(),
                orders: rustc_hash::FxHashMap::default(),
                dropped: Arc::new(AtomicUsize::new(0)),
                hit_counts: Vec::new(),
            })
        });
        match live.as_any().downcast_mut::<LiveCollection<T>>() {
            Some(live) => {
                if let Some(keys) = keys {
                    live.keys = keys;
                }
                register(live, demand)
            }
            None => Err(crate::Error::SchemaMismatch {
                collection: state.name.clone(),
                reason: "subscribed with two different record types".into(),
            }),
        }
    }
}
