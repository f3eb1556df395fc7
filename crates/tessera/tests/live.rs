//! Live subscriptions: changesets checked by applying them to the previous result and
//! comparing with a fresh fetch (property test), objects, policies, and failure isolation.

mod live_events;

use live_events::{changed, initial};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;
use tessera::collection::{Order, Record};
use tessera::live::{Event, SubscriptionEnd};
use tessera::query::field;
use tessera::{Db, Error, ObjectChange, Policy, Query, QuerySubscription, ResultChange};

const WAIT: Duration = Duration::from_secs(10);

#[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
#[record(name = "items")]
struct Item {
    #[record(key)]
    id: u32,
    priority: Option<i32>,
    tag: String,
}

fn open() -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db")).unwrap();
    (dir, db)
}

/// Applies a changeset to the previous result the way a list view does, checking that the
/// indices are consistent; returns the new result's ids.
fn apply(previous: &[u32], change: &ResultChange<Item>) -> Vec<u32> {
    let new_len = change.result.len();
    let mut gone = vec![false; previous.len()];
    for &index in change.deletions.iter().chain(change.moves.iter().map(|(from, _)| from)) {
        assert!(!gone[index], "old index {index} deleted or moved twice");
        gone[index] = true;
    }
    let mut slots: Vec<Option<u32>> = vec![None; new_len];
    for &(from, to) in &change.moves {
        assert!(slots[to].is_none());
        slots[to] = Some(previous[from]);
    }
    for &index in &change.insertions {
        assert!(slots[index].is_none(), "new index {index} inserted twice");
        slots[index] = Some(change.result[index].id);
    }
    let mut survivors = previous.iter().zip(&gone).filter(|(_, gone)| !**gone).map(|(id, _)| *id);
    let ids: Vec<u32> = slots.into_iter().map(|slot| slot.or_else(|| survivors.next()).expect("as many survivors as free slots")).collect();
    assert!(survivors.next().is_none(), "survivors left over");
    ids
}

fn ids<'a>(items: impl IntoIterator<Item = &'a Arc<Item>>) -> Vec<u32> {
    items.into_iter().map(|item| item.id).collect()
}

#[derive(Debug, Clone)]
enum Op {
    Upsert(u32, Option<i32>, u8),
    Delete(u32),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..40u32, proptest::option::weighted(0.85, -20..20i32), 0..4u8).prop_map(|(id, p, t)| Op::Upsert(id, p, t)),
        1 => (0..40u32).prop_map(Op::Delete),
    ]
}

fn queries(items: &tessera::Collection<Item>) -> Vec<Query<Item>> {
    vec![
        items.all(),
        items.filter(Item::priority().gt(0)),
        items.filter(Item::priority().ge(-5).and(Item::priority().lt(5))).order_by(Item::priority(), Order::Desc),
        items.filter(Item::tag().eq("t1")).order_by(Item::priority(), Order::Asc).limit(3),
        items.all().order_by(Item::priority(), Order::Asc).offset(2).limit(4),
        items.filter(Item::priority().is_null().or(Item::tag().eq("t2"))),
        items.filter((field("priority") % 3).eq(0)).order_by("tag", Order::Desc).order_by(Item::priority(), Order::Asc),
        items.filter(Item::priority().between(-10, 10)).order_by(Item::priority(), Order::Asc).limit(5),
        // `key == literal`: kept with the object subscriptions to the key, not in the matcher.
        items.filter(Item::id().eq(3u32)),
        items.filter(field("id").eq(7)).order_by(Item::priority(), Order::Desc).limit(1),
        // ... but not with an offset, which leaves it no row.
        items.filter(Item::id().eq(3u32)).offset(1),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// After every commit, each subscription's changeset applied to its previous result gives
    /// the delivered result, which equals a fresh fetch; commits that change nothing deliver
    /// nothing.
    #[test]
    fn changesets_rebuild_the_fetched_result(batches in proptest::collection::vec(proptest::collection::vec(op(), 1..6), 1..12)) {
        let (_dir, db) = open();
        let items = db.collection::<Item>().unwrap();
        let queries = queries(&items);
        let subscriptions: Vec<QuerySubscription<Item>> = queries.iter().map(|q| items.subscribe_query(q).unwrap()).collect();
        let mut results: Vec<Vec<u32>> = subscriptions.iter().map(|s| ids(&initial(s.recv_timeout(WAIT)))).collect();
        for batch in batches {
            db.write(|tx| {
                for op in &batch {
                    match op {
                        Op::Upsert(id, priority, tag) => items.upsert(tx, &Item { id: *id, priority: *priority, tag: format!("t{tag}") })?,
                        Op::Delete(id) => items.delete(tx, id)?,
                    };
                }
                Ok(())
            }).unwrap();
            for ((query, subscription), previous) in queries.iter().zip(&subscriptions).zip(results.iter_mut()) {
                let fetched: Vec<u32> = query.fetch(&db).unwrap().iter().map(|item| item.id).collect();
                // An unchanged list may still deliver modifications (or a record moving in place).
                let wait = if fetched == *previous { Duration::from_millis(20) } else { WAIT };
                let Some(change) = subscription.recv_timeout(wait).map(|event| changed(Some(event))) else {
                    prop_assert_eq!(&fetched, &*previous, "no delivery for a changed result: {}", query.explain().unwrap());
                    continue;
                };
                prop_assert!(!change.is_empty(), "an empty changeset was delivered");
                let rebuilt = apply(previous, &change);
                prop_assert_eq!(&rebuilt, &ids(&change.result), "{}", query.explain().unwrap());
                prop_assert_eq!(&rebuilt, &fetched, "{:?}", change);
                let fresh = query.fetch(&db).unwrap();
                let delivered: Vec<Item> = change.result.iter().map(|item| (**item).clone()).collect();
                prop_assert_eq!(delivered, fresh);
                *previous = rebuilt;
            }
        }
    }
}

#[test]
fn modifications_and_moves_are_reported() {
    let (_dir, db) = open();
    let items = db.collection::<Item>().unwrap();
    db.write(|tx| (0..5).try_for_each(|id| items.insert(tx, &Item { id, priority: Some(id as i32 * 10), tag: "a".into() }).map(drop)))
        .unwrap();
    let live = items.subscribe_query(&items.all().order_by(Item::priority(), Order::Asc)).unwrap();
    assert_eq!(ids(&initial(live.recv_timeout(WAIT))), [0, 1, 2, 3, 4]);
    db.write(|tx| items.update(tx, &2, |item| item.tag = "b".into())).unwrap();
    let change = changed(live.recv_timeout(WAIT));
    assert_eq!((change.modifications.as_slice(), change.moves.as_slice()), (&[2][..], &[][..]));
    assert_eq!(change.result[2].tag, "b");
    db.write(|tx| items.update(tx, &0, |item| item.priority = Some(35))).unwrap();
    let change = changed(live.recv_timeout(WAIT));
    assert_eq!(ids(&change.result), [1, 2, 3, 0, 4]);
    assert_eq!(change.moves, [(0, 3)]);
    assert_eq!(change.modifications, [3]);
    // A record whose sort key changes but which keeps its neighbours is modified, not moved.
    db.write(|tx| items.update(tx, &2, |item| item.priority = Some(25))).unwrap();
    let change = changed(live.recv_timeout(WAIT));
    assert_eq!(ids(&change.result), [1, 2, 3, 0, 4]);
    assert_eq!((change.modifications.as_slice(), change.moves.as_slice()), (&[1][..], &[][..]));
    // Every record re-keyed in one commit, their order kept, one new record first: an insertion
    // and modifications, no move (each row's index grew by one only for the insertion).
    db.write(|tx| {
        for id in 0..5 {
            items.update(tx, &id, |item| item.priority = item.priority.map(|priority| priority + 1))?;
        }
        items.insert(tx, &Item { id: 5, priority: Some(0), tag: "a".into() }).map(drop)
    })
    .unwrap();
    let change = changed(live.recv_timeout(WAIT));
    assert_eq!(ids(&change.result), [5, 1, 2, 3, 0, 4]);
    assert_eq!(change.insertions, [0]);
    assert_eq!(change.modifications, [1, 2, 3, 4, 5]);
    assert!(change.moves.is_empty() && change.deletions.is_empty(), "{change:?}");
    // A commit to a record outside the result delivers nothing.
    let reds = items.subscribe_query(&items.filter(Item::tag().eq("b"))).unwrap();
    assert_eq!(ids(&initial(reds.recv_timeout(WAIT))), [2]);
    db.write(|tx| items.update(tx, &4, |item| item.priority = Some(1))).unwrap();
    changed(live.recv_timeout(WAIT));
    assert!(reds.recv_timeout(Duration::from_millis(200)).is_none());
}

#[test]
fn object_subscriptions_follow_update_delete_and_reinsert() {
    let (_dir, db) = open();
    let items = db.collection::<Item>().unwrap();
    let live = items.subscribe_object(&7u32).unwrap();
    assert!(initial(live.recv_timeout(WAIT)).is_none(), "absent at first");
    let item = Item { id: 7, priority: None, tag: "x".into() };
    db.write(|tx| items.insert(tx, &item)).unwrap();
    assert!(matches!(changed(live.recv_timeout(WAIT)), ObjectChange::Updated(value) if *value == item));
    db.write(|tx| items.insert(tx, &Item { id: 8, priority: None, tag: "other".into() })).unwrap();
    db.write(|tx| items.delete(tx, &7u32)).unwrap();
    assert!(matches!(changed(live.recv_timeout(WAIT)), ObjectChange::Deleted), "the other record's commit delivered nothing");
    db.write(|tx| items.insert(tx, &item)).unwrap();
    assert!(matches!(changed(live.recv_timeout(WAIT)), ObjectChange::Updated(_)));
    // A present record is the initial state of a new subscription.
    let again = items.subscribe_object(&7u32).unwrap();
    assert_eq!(initial(again.recv_timeout(WAIT)).as_deref(), Some(&item));
    // Unchanged bytes publish nothing.
    db.write(|tx| items.upsert(tx, &item)).unwrap();
    assert!(live.recv_timeout(Duration::from_millis(200)).is_none());
}

#[test]
fn a_query_by_key_follows_its_record_like_an_object_subscription_beside_it() {
    // `id == 7` is kept with the object subscriptions to key 7 (one lookup per change, no
    // matcher): each transition of its one row is its own changeset, for typed and dynamic
    // handles alike, and a subscriber that reads late gets the net change.
    let (_dir, db) = open();
    let items = db.collection::<Item>().unwrap();
    let item = Item { id: 7, priority: Some(1), tag: "x".into() };
    let query = items.subscribe_query(&items.filter(Item::id().eq(7u32))).unwrap();
    let object = items.subscribe_object(&7u32).unwrap();
    let late = items.subscribe_query_with(&items.filter(Item::id().eq(7u32)), Policy::LatestOnly).unwrap();
    assert!(initial(query.recv_timeout(WAIT)).is_empty());
    assert!(initial(object.recv_timeout(WAIT)).is_none());
    assert!(initial(late.recv_timeout(WAIT)).is_empty());
    db.write(|tx| items.insert(tx, &item)).unwrap();
    let dynamic = db.dyn_collection("items").unwrap();
    let dyn_query = dynamic.filter_text("id == 7").unwrap().subscribe().unwrap();
    assert_eq!(initial(dyn_query.recv_timeout(WAIT)).len(), 1, "the record, as the dynamic handle starts");
    let inserted = changed(query.recv_timeout(WAIT));
    assert_eq!((inserted.insertions.as_slice(), ids(&inserted.result)), (&[0][..], vec![7]));
    assert!(inserted.deletions.is_empty() && inserted.modifications.is_empty());
    assert!(matches!(changed(object.recv_timeout(WAIT)), ObjectChange::Updated(value) if *value == item));
    db.write(|tx| items.insert(tx, &Item { id: 8, priority: None, tag: "other".into() })).unwrap();
    db.write(|tx| items.update(tx, &7u32, |item| item.priority = Some(2))).unwrap();
    let modified = changed(query.recv_timeout(WAIT));
    assert_eq!(modified.modifications, [0], "the other record's commit delivered nothing");
    assert_eq!(modified.result[0].priority, Some(2));
    let dyn_modified = changed(dyn_query.recv_timeout(WAIT));
    assert_eq!((dyn_modified.modifications.as_slice(), dyn_modified.result.len()), (&[0][..], 1));
    db.write(|tx| items.delete(tx, &7u32)).unwrap();
    let deleted = changed(query.recv_timeout(WAIT));
    assert_eq!((deleted.deletions.as_slice(), deleted.result.len()), (&[0][..], 0));
    assert!(matches!(changed(object.recv_timeout(WAIT)), ObjectChange::Updated(_)));
    assert!(matches!(changed(object.recv_timeout(WAIT)), ObjectChange::Deleted));
    // A delete of an absent record changes no result.
    db.write(|tx| items.delete(tx, &7u32)).unwrap();
    assert!(query.recv_timeout(Duration::from_millis(200)).is_none());
    db.write(|tx| items.insert(tx, &item)).unwrap();
    assert_eq!(changed(query.recv_timeout(WAIT)).insertions, [0]);
    // The late reader: inserted, modified, deleted and inserted again, merged into one change
    // from its empty initial result to the record.
    let merged = changed(late.recv_timeout(WAIT));
    assert!(late.try_recv().is_none(), "one delivery under LatestOnly");
    assert_eq!((merged.insertions.as_slice(), ids(&merged.result)), (&[0][..], vec![7]));
    assert!(merged.deletions.is_empty());
}

#[test]
fn latest_only_coalesces_unread_changes() {
    let (_dir, db) = open();
    let items = db.collection::<Item>().unwrap();
    let query = items.all().order_by(Item::priority(), Order::Desc);
    let live = items.subscribe_query_with(&query, Policy::LatestOnly).unwrap();
    let mut previous = ids(&initial(live.recv_timeout(WAIT)));
    for round in 0..5u32 {
        for step in 0..10u32 {
            let id = (round * 7 + step * 3) % 12;
            db.write(|tx| {
                if step % 4 == 3 {
                    items.delete(tx, &id)?;
                } else {
                    items.upsert(tx, &Item { id, priority: Some((step * round) as i32 % 9), tag: String::new() })?;
                }
                Ok(())
            })
            .unwrap();
        }
        std::thread::sleep(Duration::from_millis(50));
        let change = changed(live.recv_timeout(WAIT));
        assert!(live.try_recv().is_none(), "one delivery for the whole round");
        previous = apply(&previous, &change);
        assert_eq!(previous, ids(&change.result));
        assert_eq!(previous, query.fetch(&db).unwrap().iter().map(|i| i.id).collect::<Vec<_>>());
    }
}

#[test]
fn delivered_results_match_a_read_at_their_sequence() {
    let (_dir, db) = open();
    let items = db.collection::<Item>().unwrap();
    let query = items.filter(Item::priority().ge(0)).order_by(Item::priority(), Order::Asc).limit(5);
    let live = items.subscribe_query(&query).unwrap();
    initial(live.recv_timeout(WAIT));
    for i in 0..30u32 {
        db.write(|tx| items.upsert(tx, &Item { id: i % 9, priority: Some((i * 7 % 11) as i32 - 3), tag: String::new() }).map(drop))
            .unwrap();
        let sequence = db.read(|tx| Ok(tx.sequence())).unwrap();
        let fresh = query.fetch(&db).unwrap();
        if let Some(change) = live.recv_timeout(Duration::from_millis(100)).map(|event| changed(Some(event))) {
            assert_eq!(change.sequence, sequence);
            assert_eq!(change.result.iter().map(|i| (**i).clone()).collect::<Vec<_>>(), fresh);
        }
    }
}

#[test]
fn bad_queries_fail_at_subscribe_time() {
    let (_dir, db) = open();
    let items = db.collection::<Item>().unwrap();
    let result = items.subscribe_query(&items.filter(field("nope").gt(1)));
    assert!(matches!(result, Err(Error::Query(_))));
    let result = items.subscribe_query(&items.filter(field("tag").gt(1)));
    assert!(matches!(result, Err(Error::Query(_))));
}

#[test]
fn dropped_and_panicking_subscribers_leave_the_rest_alone() {
    let (_dir, db) = open();
    let items = db.collection::<Item>().unwrap();
    let query = items.all();
    let dropped = items.subscribe_query(&query).unwrap();
    drop(dropped);
    let panicking = items.subscribe_query(&query).unwrap().for_each(|event| {
        if matches!(event, Event::Changed(change) if !change.insertions.is_empty() && change.result.len() > 1) {
            panic!("consumer bug");
        }
    });
    let _panicking = panicking.unwrap();
    let (sender, receiver) = std::sync::mpsc::channel();
    let _counting = items
        .subscribe_query(&query)
        .unwrap()
        .for_each(move |event| match event {
            Event::Initial(result) => sender.send(result.len()).unwrap(),
            Event::Changed(change) => sender.send(change.result.len()).unwrap(),
            Event::Closed(_) => {}
        })
        .unwrap();
    assert_eq!(receiver.recv_timeout(WAIT).unwrap(), 0);
    for id in 0..5 {
        db.write(|tx| items.insert(tx, &Item { id, priority: None, tag: String::new() })).unwrap();
        assert_eq!(receiver.recv_timeout(WAIT).unwrap(), id as usize + 1);
    }
    // Subscribing inside a write transaction is an error, not a deadlock.
    let inside = db.write(|_| Ok(items.subscribe_query(&query).map(drop)));
    assert!(matches!(inside, Ok(Err(Error::WouldDeadlock { operation: "subscribing", .. }))));
}

#[cfg(feature = "futures")]
#[test]
fn subscriptions_are_streams() {
    use futures_core::Stream;
    use std::pin::Pin;
    use std::task::{Context, Poll, Wake, Waker};
    struct ThreadWaker(std::thread::Thread);
    impl Wake for ThreadWaker {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    let mut context = Context::from_waker(&waker);
    let (_dir, db) = open();
    let items = db.collection::<Item>().unwrap();
    let mut live = items.subscribe_query(&items.all()).unwrap();
    let mut next = || loop {
        match Pin::new(&mut live).poll_next(&mut context) {
            Poll::Ready(change) => return change,
            Poll::Pending => std::thread::park_timeout(Duration::from_millis(100)),
        }
    };
    assert_eq!(initial(next()).len(), 0);
    db.write(|tx| items.insert(tx, &Item { id: 1, priority: None, tag: String::new() })).unwrap();
    assert_eq!(changed(next()).insertions, [0]);
    drop((items, db));
    assert!(matches!(next(), Some(Event::Closed(SubscriptionEnd::DatabaseClosed))), "the stream ends with Closed");
    assert!(next().is_none(), "then None");
}

#[test]
fn subscriptions_end_when_the_database_is_gone() {
    let (_dir, db) = open();
    let items = db.collection::<Item>().unwrap();
    db.write(|tx| items.insert(tx, &Item { id: 1, priority: Some(1), tag: "a".into() }).map(drop)).unwrap();
    let object = items.subscribe_object(&1u32).unwrap();
    let query = items.subscribe_query(&items.all()).unwrap();
    assert_eq!(initial(query.recv_timeout(WAIT)).len(), 1);
    assert!(initial(object.recv_timeout(WAIT)).is_some());
    drop((items, db));
    // Both used to wait forever here: nothing ended their mailboxes when the database closed.
    fn closed<S, C>(event: Option<Event<S, C>>) -> bool {
        matches!(event, Some(Event::Closed(SubscriptionEnd::DatabaseClosed)))
    }
    let waiter =
        std::thread::spawn(move || (closed(object.recv()) && object.recv().is_none(), closed(query.recv()) && query.recv().is_none()));
    let deadline = std::time::Instant::now() + WAIT;
    while !waiter.is_finished() {
        assert!(std::time::Instant::now() < deadline, "recv still waits after the database is gone");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(waiter.join().unwrap(), (true, true));
}

#[test]
fn a_subscriber_far_behind_gets_one_resynchronising_change_and_bounded_memory() {
    // Every change is queued up to QUEUE_LEN_MAX; past it the unread ones merge, so memory is
    // bounded by the queue's length whatever the subscriber's lag, and the merged change says
    // it resynchronises (everything out, everything in) instead of passing for a diff.
    let dir = tempfile::tempdir().unwrap();
    let options = tessera::DbOptions { durability: tessera::Durability::BUFFERED, ..tessera::DbOptions::default() };
    let db = Db::open_with(dir.path().join("db"), options).unwrap();
    let items = db.collection::<Item>().unwrap();
    let query = items.all().order_by(Item::priority(), Order::Asc);
    let live = items.subscribe_query(&query).unwrap();
    let mut previous = ids(&initial(live.recv_timeout(WAIT)));
    let dictionary = db.dictionary().unwrap();
    let marker = dictionary.subscribe::<u8>("marker").unwrap();
    initial(marker.recv_timeout(WAIT));
    let commits = tessera::live::QUEUE_LEN_MAX + 50;
    for round in 0..commits {
        let id = (round % 40) as u32;
        db.write(|tx| items.upsert(tx, &Item { id, priority: Some((round * 7 % 23) as i32), tag: String::new() }).map(drop)).unwrap();
    }
    // The engine applies commits in order: once the marker's later commit is delivered, every
    // item commit has been.
    dictionary.set("marker", &1u8).unwrap();
    dictionary.flush().unwrap();
    changed(marker.recv_timeout(WAIT));
    let mut events = Vec::new();
    while let Some(event) = live.try_recv() {
        events.push(changed(Some(event)));
    }
    assert_eq!(events.len(), tessera::live::QUEUE_LEN_MAX, "the queue held at most its bound");
    assert!(events[..events.len() - 1].iter().all(|change| !change.resynced), "only the merged change resynchronises");
    assert!(events.last().unwrap().resynced);
    for change in &events {
        previous = apply(&previous, change);
    }
    assert_eq!(previous, ids_of(&query, &db));
}

fn ids_of(query: &Query<Item>, db: &Db) -> Vec<u32> {
    query.fetch(db).unwrap().iter().map(|item| item.id).collect()
}

#[test]
fn a_small_commit_is_delivered_before_write_returns() {
    // The committing thread delivers a small batch itself once it has released the write lock
    // (when no delivery is under way), so a subscriber on the same thread reads the change
    // without waiting, and no thread hop stands between a commit and its subscribers.
    let (_dir, db) = open();
    let items = db.collection::<Item>().unwrap();
    let live = items.subscribe_query(&items.filter(Item::tag().eq("a"))).unwrap();
    let object = items.subscribe_object(&1u32).unwrap();
    let dictionary = db.dictionary().unwrap();
    let key = dictionary.subscribe::<u8>("k").unwrap();
    initial(live.recv_timeout(WAIT));
    initial(object.recv_timeout(WAIT));
    initial(key.recv_timeout(WAIT));
    for id in 1..20u32 {
        db.write(|tx| items.upsert(tx, &Item { id, priority: None, tag: "a".into() }).map(drop)).unwrap();
        let change = changed(live.try_recv());
        assert_eq!(change.result.len(), id as usize, "delivered by the time write returned");
    }
    assert!(matches!(changed(object.try_recv()), ObjectChange::Updated(item) if item.id == 1));
    dictionary.set("k", &7u8).unwrap();
    dictionary.flush().unwrap(); // the flush's commit delivers before it returns
    assert_eq!(changed(key.try_recv()), Some(7));
}

#[test]
fn a_delivery_shares_unchanged_records_with_the_previous_one_and_reads_them_once_it_is_dropped() {
    // The engine keeps sort keys only: a record the commit did not change comes from the
    // delivery the subscriber still holds (the same allocation), or from storage when the
    // subscriber dropped it.
    let (_dir, db) = open();
    let items = db.collection::<Item>().unwrap();
    db.write(|tx| (0..40).try_for_each(|id| items.insert(tx, &Item { id, priority: Some(id as i32), tag: "a".into() }).map(drop))).unwrap();
    let query = items.filter(Item::priority().ge(5)).order_by(Item::priority(), Order::Desc).offset(2).limit(20);
    let live = items.subscribe_query(&query).unwrap();
    let first = initial(live.recv_timeout(WAIT));
    assert_eq!(ids(&first), (18..=37).rev().collect::<Vec<_>>());
    db.write(|tx| items.update(tx, &30, |item| item.tag = "b".into())).unwrap();
    let second = changed(live.recv_timeout(WAIT));
    assert_eq!(second.modifications, [7]);
    assert_eq!(second.result[7].tag, "b");
    assert!(Arc::ptr_eq(&first[0], &second.result[0]), "an unchanged record is the previous delivery's");
    drop(first);
    let kept = second.result.clone();
    drop(second);
    drop(kept); // the subscriber holds no delivery now
    db.write(|tx| items.update(tx, &20, |item| item.priority = Some(100))).unwrap();
    let third = changed(live.recv_timeout(WAIT));
    assert_eq!(ids(&third.result), ids_of(&query, &db));
    let fresh = query.fetch(&db).unwrap();
    assert!(third.result.iter().map(|item| &**item).eq(fresh.iter()), "records read from storage equal a fetch");
}

/// `items` as another program declares it: one field more.
#[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
#[record(name = "items")]
struct ItemWithNote {
    #[record(key)]
    id: u32,
    priority: Option<i32>,
    tag: String,
    note: Option<String>,
}

/// `items` with an index on `tag`: the same shape.
#[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
#[record(name = "items")]
struct IndexedItem {
    #[record(key)]
    id: u32,
    priority: Option<i32>,
    #[record(index)]
    tag: String,
}

/// The reason a subscription ended, which must be a `SchemaMismatch` naming `items`.
fn ended_by_schema<S: std::fmt::Debug, C: std::fmt::Debug>(event: Option<Event<S, C>>) {
    match event {
        Some(Event::Closed(SubscriptionEnd::Failed(error))) => {
            assert!(matches!(&*error, Error::SchemaMismatch { collection, .. } if collection == "items"), "{error}")
        }
        other => panic!("expected Closed(Failed(SchemaMismatch)), got {other:?}"),
    }
}

#[test]
fn a_schema_change_ends_the_subscriptions_that_read_by_the_old_shape() {
    // Before, the subscriptions of the first record type went on after another type changed
    // the collection's shape: they decoded the new records by the old type (dropping the new
    // field) and delivered them as changes, while every other use of the old handle was
    // refused as `SchemaMismatch`.
    let (_dir, db) = open();
    let items = db.collection::<Item>().unwrap();
    db.write(|tx| items.insert(tx, &Item { id: 1, priority: Some(5), tag: "a".into() }).map(drop)).unwrap();
    let query = items.subscribe_query(&items.filter(Item::priority().gt(0))).unwrap();
    assert_eq!(ids(&initial(query.recv_timeout(WAIT))), [1]);
    let object = items.subscribe_object(&1u32).unwrap();
    assert!(initial(object.recv_timeout(WAIT)).is_some());
    // A new index alone changes nothing a subscription reads by.
    let indexed = db.collection::<IndexedItem>().unwrap();
    db.write(|tx| indexed.insert(tx, &IndexedItem { id: 2, priority: Some(6), tag: "b".into() }).map(drop)).unwrap();
    assert_eq!(changed(query.recv_timeout(WAIT)).result.len(), 2);
    let noted = db.collection::<ItemWithNote>().unwrap();
    db.write(|tx| noted.insert(tx, &ItemWithNote { id: 3, priority: Some(7), tag: "c".into(), note: Some("n".into()) }).map(drop)).unwrap();
    ended_by_schema(query.recv_timeout(WAIT));
    ended_by_schema(object.recv_timeout(WAIT));
    assert!(query.recv_timeout(Duration::from_millis(100)).is_none(), "nothing after the end");
    // A subscription through the new handle follows the new shape.
    let again = noted.subscribe_query(&noted.filter(ItemWithNote::priority().gt(0))).unwrap();
    assert_eq!(initial(again.recv_timeout(WAIT)).len(), 3);
    db.write(|tx| noted.insert(tx, &ItemWithNote { id: 4, priority: Some(8), tag: "d".into(), note: None }).map(drop)).unwrap();
    assert_eq!(changed(again.recv_timeout(WAIT)).result.len(), 4);
}

#[test]
fn a_limited_subscription_refills_after_another_open_added_an_index() {
    // A limited result that shrank past what it held is read again from storage. Through a
    // state whose indexes another open changed, that read was refused (the planner would read
    // the stale index ids), and the subscription ended although a new index ends nothing.
    let (_dir, db) = open();
    let items = db.collection::<Item>().unwrap();
    db.write(|tx| (1..=3).try_for_each(|id| items.insert(tx, &Item { id, priority: Some(id as i32), tag: "t".into() }).map(drop))).unwrap();
    let live = items.subscribe_query(&items.all().order_by(Item::priority(), Order::Asc).limit(1)).unwrap();
    assert_eq!(ids(&initial(live.recv_timeout(WAIT))), [1]);
    let indexed = db.collection::<IndexedItem>().unwrap();
    db.write(|tx| indexed.delete(tx, &1u32).map(drop)).unwrap();
    assert_eq!(ids(&changed(live.recv_timeout(WAIT)).result), [2], "refilled from storage");
    // A new subscription through the old handle is refused, as its queries are.
    assert!(matches!(items.subscribe_query(&items.all()), Err(Error::SchemaMismatch { .. })));
    assert!(matches!(items.all().fetch(&db), Err(Error::SchemaMismatch { .. })));
}

/// A delivery shares the rows a commit did not change with the previous delivery: appending to
/// a large result, or rewriting one of its rows in place, costs the engine and the subscriber
/// O(log n), not a copy of every row. The rows' reference counts show it: a row that the next
/// delivery copied (the `Arc<Vec<Arc<T>>>` results did) is counted by both deliveries; a row
/// in a node both share is counted once.
#[test]
fn appending_to_a_result_or_rewriting_a_row_copies_no_other_row() {
    const ROWS: u32 = 1_000;
    let (_dir, db) = open();
    let items = db.collection::<Item>().unwrap();
    let item = |id: u32, priority: i32| Item { id, priority: Some(priority), tag: format!("t{id}") };
    db.write(|tx| (0..ROWS).try_for_each(|id| items.insert(tx, &item(id, 0)).map(drop))).unwrap();
    let live = items.subscribe_query(&items.all()).unwrap();
    let first = initial(live.recv_timeout(WAIT));
    assert_eq!(first.len(), ROWS as usize);
    assert_eq!(Arc::strong_count(&first[0]), 1, "the initial result alone holds its rows");

    // Appended after the last row.
    db.write(|tx| items.insert(tx, &item(ROWS, 0)).map(drop)).unwrap();
    let appended = changed(live.recv_timeout(WAIT));
    assert_eq!((appended.insertions.as_slice(), appended.result.len()), (&[ROWS as usize][..], ROWS as usize + 1));
    assert_eq!(ids(&appended.result), (0..=ROWS).collect::<Vec<_>>());
    assert_eq!(Arc::strong_count(&first[0]), 1, "the first row is shared, not copied into the new result");
    assert!(Arc::ptr_eq(&first[0], &appended.result[0]));

    // One row rewritten in place.
    db.write(|tx| items.update(tx, &500, |item| item.priority = Some(7)).map(drop)).unwrap();
    let rewritten = changed(live.recv_timeout(WAIT));
    assert_eq!(rewritten.modifications, [500]);
    assert_eq!(rewritten.result[500].priority, Some(7));
    assert_eq!(appended.result[500].priority, Some(0), "the previous delivery is unchanged");
    assert_eq!(ids(&rewritten.result), (0..=ROWS).collect::<Vec<_>>());
    assert_eq!(Arc::strong_count(&first[0]), 1, "rows far from the rewritten one are shared");
    assert!(Arc::ptr_eq(&first[0], &rewritten.result[0]));

    // One row removed from the middle: a new result from the merge, its other rows taken from
    // the previous delivery (the same records, not read again from storage).
    db.write(|tx| items.delete(tx, &250).map(drop)).unwrap();
    let removed = changed(live.recv_timeout(WAIT));
    assert_eq!(removed.deletions, [250]);
    assert_eq!(ids(&removed.result), (0..=ROWS).filter(|&id| id != 250).collect::<Vec<_>>());
    assert!(Arc::ptr_eq(&rewritten.result[0], &removed.result[0]));
    assert!(Arc::ptr_eq(&rewritten.result[999], &removed.result[998]));
    assert!(Arc::ptr_eq(&rewritten.result[500], &removed.result[499]), "the rewritten row, from the previous delivery");
}

/// A commit that changes many subscribed objects, updating some and deleting others: each
/// subscription gets exactly its own record's change, once per commit, in commit order, and
/// two subscriptions of one key get the same.
#[test]
fn a_large_commit_delivers_each_object_subscription_its_own_change_in_commit_order() {
    const OBJECTS: u32 = 1_500;
    let (_dir, db) = open();
    let items = db.collection::<Item>().unwrap();
    let item = |id: u32, priority: i32| Item { id, priority: Some(priority), tag: format!("t{id}") };
    db.write(|tx| (0..OBJECTS).try_for_each(|id| items.insert(tx, &item(id, 0)).map(drop))).unwrap();
    let subs: Vec<_> = (0..OBJECTS).map(|id| items.subscribe_object(&id).unwrap()).collect();
    let twin = items.subscribe_object(&(OBJECTS - 1)).unwrap();
    for sub in subs.iter().chain([&twin]) {
        assert!(initial(sub.recv_timeout(WAIT)).is_some());
    }
    // Every object updated, then every third deleted and the rest updated again.
    db.write(|tx| (0..OBJECTS).try_for_each(|id| items.update(tx, &id, |item| item.priority = Some(id as i32 + 1)).map(drop))).unwrap();
    db.write(|tx| {
        (0..OBJECTS).try_for_each(|id| match id % 3 {
            0 => items.delete(tx, &id).map(drop),
            _ => items.update(tx, &id, |item| item.priority = Some(-(id as i32))).map(drop),
        })
    })
    .unwrap();
    for (id, sub) in (0..OBJECTS).zip(&subs) {
        let ObjectChange::Updated(first) = changed(sub.recv_timeout(WAIT)) else { panic!("object {id}: the first commit deleted nothing") };
        assert_eq!((first.id, first.priority), (id, Some(id as i32 + 1)), "object {id}: its own record, first commit");
        match changed(sub.recv_timeout(WAIT)) {
            ObjectChange::Deleted => assert_eq!(id % 3, 0, "object {id} was not deleted"),
            ObjectChange::Updated(second) => assert_eq!((second.id, second.priority), (id, Some(-(id as i32)))),
        }
        assert!(sub.try_recv().is_none(), "object {id}: one delivery per commit");
    }
    let twin_changes: Vec<_> = (0..2).map(|_| changed(twin.recv_timeout(WAIT))).collect();
    assert!(
        matches!(&twin_changes[..], [ObjectChange::Updated(a), ObjectChange::Updated(b)] if a.priority == Some(OBJECTS as i32) && b.priority == Some(-(OBJECTS as i32 - 1)))
    );
}
