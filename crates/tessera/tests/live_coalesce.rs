//! A latest-only query subscription merges the changes it has not delivered yet. A record
//! that left a limited window (pushed out by an insertion ahead of it), changed while outside
//! it, and came back through a refill was in both the merged change's previous result and its
//! new one, and was not listed as modified: a subscriber applying the changeset kept its old
//! value. Found by `live_oracle` once NULLs sorted last ascending (the NULL record at the end
//! of the window was the one pushed out).

use std::time::Duration;
use tessera::collection::{Order, Record};
use tessera::live::{Event, Policy};

#[derive(Record, Debug, Clone, PartialEq)]
#[record(name = "ranked")]
struct Ranked {
    #[record(key)]
    id: u32,
    rank: i32,
    note: String,
}

#[test]
fn a_record_that_left_the_window_changed_and_came_back_is_modified() {
    let dir = tempfile::tempdir().unwrap();
    let db = tessera::Db::open(dir.path().join("db")).unwrap();
    let ranked = db.collection::<Ranked>().unwrap();
    let row = |id: u32, rank: i32, note: &str| Ranked { id, rank, note: note.into() };
    db.write(|tx| {
        ranked.insert(tx, &row(1, 1, "one"))?;
        ranked.insert(tx, &row(2, 2, "two"))
    })
    .unwrap();
    let query = ranked.all().order_by(Ranked::rank(), Order::Asc).limit(2);
    let live = ranked.subscribe_query_with(&query, Policy::LatestOnly).unwrap();
    let mut view: Vec<Ranked> =
        live.recv_timeout(Duration::from_secs(10)).and_then(Event::initial).unwrap().iter().map(|row| (**row).clone()).collect();
    // Record 2 leaves the window, changes outside it, and comes back when record 0 goes.
    db.write(|tx| ranked.insert(tx, &row(0, 0, "zero")).map(drop)).unwrap();
    db.write(|tx| ranked.update(tx, &2u32, |row| row.note = "changed".into()).map(drop)).unwrap();
    db.write(|tx| ranked.delete(tx, &0u32).map(drop)).unwrap();
    let fresh = query.fetch(&db).unwrap();
    while view != fresh {
        let change = live.recv_timeout(Duration::from_secs(10)).and_then(Event::changed).expect("a change");
        // Apply the changeset as a subscriber would: deletions, insertions and moves by index,
        // and a modified record's new value.
        let mut next: Vec<Option<Ranked>> = view.iter().cloned().map(Some).collect();
        for &deleted in change.deletions.iter().rev() {
            next.remove(deleted);
        }
        let mut next: Vec<Ranked> = next.into_iter().flatten().collect();
        for &inserted in &change.insertions {
            next.insert(inserted, (*change.result[inserted]).clone());
        }
        for &modified in &change.modifications {
            next[modified] = (*change.result[modified]).clone();
        }
        let delivered: Vec<Ranked> = change.result.iter().map(|row| (**row).clone()).collect();
        assert_eq!(next, delivered, "the changeset applied to the previous result is the delivered result: {change:?}");
        view = delivered;
    }
}
