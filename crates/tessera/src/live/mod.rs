//! Live subscriptions: an object or a query, kept current from the change feed with
//! incremental changesets, never by re-running the query; and the one shape every
//! subscription of the library has (documents, their fields and dictionary keys too): a
//! [`Subscription`] whose [`Event`]s are `Initial`, then `Changed`, then `Closed`.
//!
//! ```
//! use serde::{Deserialize, Serialize};
//! use tessera::collection::{Order, Record};
//! use tessera::live::Event;
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
//! let first = live.recv_timeout(Duration::from_secs(5)).and_then(Event::initial).unwrap();
//! assert!(first.is_empty(), "the current result first");
//!
//! db.write(|tx| {
//!     tasks.insert(tx, &Task { id: 1, priority: 9 })?;
//!     tasks.insert(tx, &Task { id: 2, priority: 1 })
//! })?;
//! let change = live.recv_timeout(Duration::from_secs(5)).and_then(Event::changed).unwrap();
//! assert_eq!(change.insertions, [0]);
//! assert_eq!(change.result[0].id, 1);
//! # Ok::<(), tessera::Error>(())
//! ```
//!
//! **How a commit reaches a subscription.** The store's feed hands each committed batch, after
//! the write lock is released, to this module on the feed's delivery thread. Each changed
//! record's old and new versions are looked up in the [`matcher`] (hash maps for equality,
//! interval indexes for ranges, a primary-key map for object subscriptions and for queries
//! that are exactly `key == literal`, whose result is one record or none), so only affected
//! subscriptions do any work; a subscription's result is then updated by merging, its
//! changeset computed in the same pass, and the changed records decoded once per commit
//! however many subscriptions they reach. A result is kept as its rows' sort keys only; a
//! delivery's unchanged rows come from the previous delivery while the subscriber holds it,
//! else from storage. A limited result that shrank is refilled from storage.
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
//! **Objects.** [`crate::Collection::subscribe_object`] delivers the record as it is first
//! (`None`: absent), then [`ObjectChange::Updated`] for every commit that changes the record
//! and [`ObjectChange::Deleted`] when it is removed. Unlike
//! Dflat, the subscription does not end on delete: a record inserted again under the same key
//! is delivered as `Updated`, so a view bound to a key follows it through delete and re-insert.

mod by_key;
mod changeset;
mod engine;
mod event;
mod hits;
mod mailbox;
pub mod matcher;
mod record;
mod results;
mod rows;
mod state;
mod subscription;
mod watch;

/// A deterministic xorshift64 stream from `seed` (not zero), for the unit tests' random cases.
#[cfg(test)]
fn test_rng(mut seed: u64) -> impl FnMut() -> u64 {
    assert_ne!(seed, 0, "xorshift stays at zero");
    move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    }
}

pub use changeset::{ObjectChange, ResultChange};
pub use event::Event;
pub use mailbox::{Policy, QUEUE_LEN_MAX, SubscriptionEnd};
pub(crate) use record::LiveRecord;
pub use results::Results;
pub use subscription::{ObjectSubscription, QuerySubscription, Subscription, SubscriptionHandle, ValueSubscription};
pub(crate) use watch::{Follow, watch};

use crate::Db;
use crate::collection::{Collection, CollectionState, Query, QueryParts, Record};
use crate::error::Result;
use crate::store::Snapshot;
use by_key::{KeyQuerySub, ObjectSub};
use engine::Engine;
use mailbox::Mailbox;
use state::QuerySub;
use std::sync::Arc;

impl<T: Record> Collection<T> {
    /// Subscribes to the record at `key`: [`Event::Initial`] with the record now (`None`:
    /// absent), then [`ObjectChange::Updated`] after every commit that changes it and
    /// [`ObjectChange::Deleted`] when it is removed, then `Closed` when the database closes.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tessera::collection::Record;
    /// # #[derive(Record, Debug, Clone, PartialEq)]
    /// # struct Task { #[record(key)] id: u32, priority: i32 }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let tasks = db.collection::<Task>()?;
    /// # let wait = Duration::from_secs(5);
    /// use tessera::live::Event;
    /// db.write(|tx| tasks.insert(tx, &Task { id: 1, priority: 5 }))?;
    /// let live = tasks.subscribe_object(&1)?;
    /// let Some(Event::Initial(Some(task))) = live.recv_timeout(wait) else { panic!("no initial record") };
    /// assert_eq!(task.priority, 5);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn subscribe_object<Q>(&self, key: &Q) -> Result<ObjectSubscription<T>>
    where
        T::Key: std::borrow::Borrow<Q>,
        Q: crate::store::key::KeyPart + ?Sized,
    {
        self.subscribe_object_with(key, Policy::EveryChange)
    }

    /// [`Collection::subscribe_object`] with a delivery policy.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tessera::collection::Record;
    /// # #[derive(Record, Debug, Clone, PartialEq)]
    /// # struct Task { #[record(key)] id: u32, priority: i32 }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let tasks = db.collection::<Task>()?;
    /// # let wait = Duration::from_secs(5);
    /// use tessera::live::{Event, ObjectChange, Policy};
    /// let live = tasks.subscribe_object_with(&1, Policy::LatestOnly)?;
    /// live.recv_timeout(wait); // Initial
    /// for priority in 0..5 {
    ///     db.write(|tx| tasks.upsert(tx, &Task { id: 1, priority }))?;
    /// }
    /// let mut last = None;
    /// while let Some(Event::Changed(ObjectChange::Updated(task))) = live.recv_timeout(Duration::from_millis(200)) {
    ///     last = Some(task.priority);
    /// }
    /// assert_eq!(last, Some(4), "the latest version arrives");
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn subscribe_object_with<Q>(&self, key: &Q, policy: Policy) -> Result<ObjectSubscription<T>>
    where
        T::Key: std::borrow::Borrow<Q>,
        Q: crate::store::key::KeyPart + ?Sized,
    {
        let mut encoded = Vec::new();
        key.encode_key(&mut encoded);
        subscribe_object_at::<T>(&self.db, &self.state, (), encoded, policy)
    }

    /// Subscribes to a query: [`Event::Initial`] with the current result first, then one
    /// [`ResultChange`] per commit that changes it, then `Closed` when the database closes. The
    /// query is type-checked now: a bad one is an error here.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tessera::collection::Record;
    /// # #[derive(Record, Debug, Clone, PartialEq)]
    /// # struct Task { #[record(key)] id: u32, priority: i32 }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let tasks = db.collection::<Task>()?;
    /// # let wait = Duration::from_secs(5);
    /// use tessera::live::Event;
    /// let live = tasks.subscribe_query(&tasks.filter(Task::priority().gt(3)))?;
    /// live.recv_timeout(wait); // the initial (empty) result
    /// db.write(|tx| { tasks.insert(tx, &Task { id: 1, priority: 1 })?; tasks.insert(tx, &Task { id: 2, priority: 9 }) })?;
    /// let change = live.recv_timeout(wait).and_then(Event::changed).expect("a change");
    /// assert_eq!(change.result.iter().map(|task| task.id).collect::<Vec<_>>(), [2]);
    /// assert!(tasks.subscribe_query(&tasks.filter_text("priority > 3")?).is_ok());
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn subscribe_query(&self, query: &Query<T>) -> Result<QuerySubscription<T>> {
        self.subscribe_query_with(query, Policy::EveryChange)
    }

    /// [`Collection::subscribe_query`] with a delivery policy.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tessera::collection::Record;
    /// # #[derive(Record, Debug, Clone, PartialEq)]
    /// # struct Task { #[record(key)] id: u32, priority: i32 }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let tasks = db.collection::<Task>()?;
    /// # let wait = Duration::from_secs(5);
    /// use tessera::live::Policy;
    /// let live = tasks.subscribe_query_with(&tasks.all().limit(10), Policy::LatestOnly)?;
    /// assert!(live.recv_timeout(wait).is_some());
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn subscribe_query_with(&self, query: &Query<T>, policy: Policy) -> Result<QuerySubscription<T>> {
        query.explain()?; // type-checks
        subscribe_query_parts::<T>(&self.db, &self.state, (), query.parts(), policy)
    }
}

/// Subscribes to the record of collection `state` stored under `key` (encoded), delivered as
/// `T`; `keys` is the collection's key layout. Typed and dynamic object subscriptions.
pub(crate) fn subscribe_object_at<T: LiveRecord>(
    db: &Db,
    state: &Arc<CollectionState>,
    keys: T::Keys,
    key: Vec<u8>,
    policy: Policy,
) -> Result<ObjectSubscription<T>> {
    let mailbox = Arc::new(Mailbox::new(policy));
    let engine = Engine::of(db)?;
    engine.register::<T>(db, state, keys, |live, demand| {
        let txn = db.read_txn()?;
        mailbox.push(Event::Initial(stored_record::<T>(&txn, state, &key)?));
        mailbox.count_drop_in(live.dropped.clone());
        let sub = ObjectSub { mailbox: Arc::downgrade(&mailbox), since: txn.sequence(), _demand: demand };
        live.by_key.entry(key.into_boxed_slice()).or_default().objects.push(sub);
        Ok(())
    })?;
    Ok(ObjectSubscription::new(mailbox))
}

/// Subscribes to the query `parts` (type-checked already) on collection `state`, its records
/// delivered as `T`; `keys` is the collection's key layout. Typed and dynamic query
/// subscriptions: both are kept by the incremental engine.
pub(crate) fn subscribe_query_parts<T: LiveRecord>(
    db: &Db,
    state: &Arc<CollectionState>,
    keys: T::Keys,
    parts: QueryParts,
    policy: Policy,
) -> Result<QuerySubscription<T>> {
    // As a query through the same handle would be: refused once another open changed the
    // collection's schema (a running subscription reloads by records alone, `record::entries`).
    crate::store::ReadSource::with_snapshot(db, |snapshot| state.current_in(snapshot))?;
    if let Some(key) = T::with_layout(&keys, |layout| single_key(state, layout, &parts)) {
        return subscribe_key_query::<T>(db, state, keys, key, policy);
    }
    let anchoring = matcher::anchoring(&state.shape, parts.predicate.as_deref());
    let orders = parts.sort_fields();
    let orders_empty = orders.is_empty();
    let orders_signature = format!("{:?}", parts.orders);
    let mailbox = Arc::new(Mailbox::new(policy));
    let engine = Engine::of(db)?;
    engine.register::<T>(db, state, keys, |live, demand| {
        let orders_signature = live.intern_orders(orders_signature);
        let mut sub = QuerySub {
            parts,
            orders,
            orders_signature,
            anchors: anchoring.anchors,
            exact: anchoring.exact,
            rows: rows::Rows::new(!orders_empty),
            delivered: results::LastDelivery::none(),
            complete: true,
            since: 0,
            policy,
            mailbox: Arc::downgrade(&mailbox),
            _demand: demand,
        };
        let values = sub.load(db, state, &live.keys)?;
        mailbox.push(Event::Initial(sub.deliver(results::vector_of(values))));
        mailbox.count_drop_in(live.dropped.clone());
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

/// The record of collection `state` stored under `key` in `txn`, decoded as `T` (`None`:
/// absent).
fn stored_record<T: LiveRecord>(txn: &crate::store::ReadTxn<'_>, state: &CollectionState, key: &[u8]) -> Result<Option<Arc<T>>> {
    match txn.get_value(&state.records, key)? {
        Some(bytes) => Ok(Some(Arc::new(T::decode_stored(state, key, bytes)?))),
        None => Ok(None),
    }
}

/// The one key whose record is the whole result of `parts` (a query that is exactly `key ==
/// literal`, with no offset and room for a row; its order, if any, cannot matter), else `None`.
fn single_key(state: &Arc<CollectionState>, layout: &dyn crate::collection::key_layout::KeyLayout, parts: &QueryParts) -> Option<Vec<u8>> {
    let unordered = QueryParts { orders: Vec::new(), ..parts.clone() };
    unordered.spec(state, layout).single_key()
}

/// Subscribes to a query whose whole result is the record at `key` (see [`by_key`]): kept
/// beside the object subscriptions to that key, not in the matcher.
fn subscribe_key_query<T: LiveRecord>(
    db: &Db,
    state: &Arc<CollectionState>,
    keys: T::Keys,
    key: Vec<u8>,
    policy: Policy,
) -> Result<QuerySubscription<T>> {
    let mailbox = Arc::new(Mailbox::new(policy));
    let engine = Engine::of(db)?;
    engine.register::<T>(db, state, keys, |live, demand| {
        let txn = db.read_txn()?;
        let value = stored_record::<T>(&txn, state, &key)?;
        let present = value.is_some();
        mailbox.push(Event::Initial(Results::of(results::vector_of(value))));
        mailbox.count_drop_in(live.dropped.clone());
        let sub = KeyQuerySub { mailbox: Arc::downgrade(&mailbox), since: txn.sequence(), present, policy, _demand: demand };
        live.by_key.entry(key.into_boxed_slice()).or_default().queries.push(sub);
        Ok(())
    })?;
    Ok(QuerySubscription::new(mailbox))
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
    fn a_record_that_does_not_decode_ends_subscriptions_with_the_error_and_nothing_after_it() {
        // Object subscriptions skipped such a change, so the subscriber could not tell it from
        // no change; query subscriptions ended with no reason, and a later commit could still
        // deliver a changeset computed without the failed one.
        use super::SubscriptionEnd;
        use std::time::Duration;
        let dir = tempfile::tempdir().unwrap();
        let db = crate::Db::open(dir.path().join("db")).unwrap();
        let counted = db.collection::<Counted>().unwrap();
        db.write(|tx| counted.upsert(tx, &Counted { id: 1, n: 1 }).map(drop)).unwrap();
        let object = counted.subscribe_object(&1u32).unwrap();
        let query = counted.subscribe_query(&counted.all()).unwrap();
        // A query by key is kept beside the object subscriptions (`by_key`), not in the matcher.
        let by_key = counted.subscribe_query(&counted.filter(Counted::id().eq(1u32))).unwrap();
        assert!(matches!(object.recv_timeout(Duration::from_secs(5)), Some(super::Event::Initial(Some(_)))));
        assert_eq!(query.recv_timeout(Duration::from_secs(5)).and_then(super::Event::initial).unwrap().len(), 1, "the initial result");
        assert_eq!(by_key.recv_timeout(Duration::from_secs(5)).and_then(super::Event::initial).unwrap().len(), 1);
        // Stored bytes of another shape under record 1's key (a string, not a struct).
        let records = db.internal_keyspace("tessera.col.counted").unwrap();
        let key = crate::store::key::encode(&1u32);
        db.write(|tx| tx.put(&records, &key, &tessera_value::to_vec("not a record").unwrap())).unwrap();
        db.write(|tx| counted.upsert(tx, &Counted { id: 2, n: 2 }).map(drop)).unwrap(); // after it
        assert!(
            matches!(object.recv_timeout(Duration::from_secs(5)), Some(super::Event::Closed(SubscriptionEnd::Failed(_)))),
            "no delivery for the damaged record, nor after it: Closed with the failure"
        );
        assert!(
            matches!(query.recv_timeout(Duration::from_secs(5)), Some(super::Event::Closed(SubscriptionEnd::Failed(_)))),
            "no changeset after the one that failed"
        );
        assert!(
            matches!(by_key.recv_timeout(Duration::from_secs(5)), Some(super::Event::Closed(SubscriptionEnd::Failed(_)))),
            "the query by key ends with the failure too"
        );
        assert!(object.try_recv().is_none() && query.try_recv().is_none() && by_key.try_recv().is_none(), "nothing after Closed");
        for ended in [object.ended(), query.ended(), by_key.ended()] {
            match ended {
                Some(SubscriptionEnd::Failed(error)) => {
                    let text = error.to_string();
                    assert!(text.contains("counted") && text.contains('1'), "names collection and key: {text}");
                }
                other => panic!("expected a failure, got {other:?}"),
            }
        }
    }

    #[test]
    fn a_record_that_does_not_decode_ends_a_dynamic_subscription_with_the_error() {
        use super::SubscriptionEnd;
        use std::time::Duration;
        let dir = tempfile::tempdir().unwrap();
        let db = crate::Db::open(dir.path().join("db")).unwrap();
        let counted = db.collection::<Counted>().unwrap();
        db.write(|tx| counted.upsert(tx, &Counted { id: 1, n: 1 }).map(drop)).unwrap();
        let dynamic = db.dyn_collection("counted").unwrap();
        let query = dynamic.all().subscribe().unwrap();
        let key = tessera_value::from_json(b"1").unwrap();
        let object = dynamic.subscribe_object(tessera_value::Doc::from_untrusted(&key).unwrap().root()).unwrap();
        assert_eq!(query.recv_timeout(Duration::from_secs(5)).and_then(super::Event::initial).unwrap().len(), 1);
        assert!(matches!(object.recv_timeout(Duration::from_secs(5)), Some(super::Event::Initial(Some(_)))));
        let records = db.internal_keyspace("tessera.col.counted").unwrap();
        let stored_key = crate::store::key::encode(&1u32);
        db.write(|tx| tx.put(&records, &stored_key, b"\xff\xff not a document")).unwrap();
        for ended in [
            query.recv_timeout(Duration::from_secs(5)).map(|_| query.ended()),
            object.recv_timeout(Duration::from_secs(5)).map(|_| object.ended()),
        ] {
            match ended.flatten() {
                Some(SubscriptionEnd::Failed(error)) => assert!(error.to_string().contains("counted"), "names the collection: {error}"),
                other => panic!("expected a failure, got {other:?}"),
            }
        }
    }

    #[test]
    fn a_panicking_callback_is_removed_and_reported_on_its_handle_and_others_still_get_deliveries() {
        use super::SubscriptionEnd;
        use std::time::Duration;
        let dir = tempfile::tempdir().unwrap();
        let db = crate::Db::open(dir.path().join("db")).unwrap();
        let counted = db.collection::<Counted>().unwrap();
        let handle = counted.subscribe_object(&1u32).unwrap().for_each(|_| panic!("callback bug")).unwrap();
        let other = counted.subscribe_object(&1u32).unwrap();
        assert!(matches!(other.recv_timeout(Duration::from_secs(5)), Some(super::Event::Initial(None))));
        db.write(|tx| counted.upsert(tx, &Counted { id: 1, n: 1 }).map(drop)).unwrap();
        assert!(matches!(other.recv_timeout(Duration::from_secs(5)), Some(super::Event::Changed(_))));
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while handle.ended().is_none() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(matches!(handle.ended(), Some(SubscriptionEnd::CallbackPanicked(message)) if message == "callback bug"));
        db.write(|tx| counted.upsert(tx, &Counted { id: 1, n: 2 }).map(drop)).unwrap();
        assert!(matches!(other.recv_timeout(Duration::from_secs(5)), Some(super::Event::Changed(_))), "the engine still serves the others");
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
