//! The changeset model: what a delivery tells a subscriber (an object's new version, or a
//! query result's deletions, insertions, modifications and moves), and how unread deliveries
//! coalesce.

use super::mailbox::Coalesce;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// A change to a subscribed object.
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
/// use tessera::live::{Event, ObjectChange};
/// let live = tasks.subscribe_object(&1)?;
/// assert!(matches!(live.recv_timeout(wait), Some(Event::Initial(None))));
/// db.write(|tx| tasks.insert(tx, &Task { id: 1, priority: 5 }))?;
/// let Some(Event::Changed(ObjectChange::Updated(task))) = live.recv_timeout(wait) else { panic!("no update") };
/// assert_eq!(task.priority, 5);
/// db.write(|tx| tasks.delete(tx, &1))?;
/// assert!(matches!(live.recv_timeout(wait), Some(Event::Changed(ObjectChange::Deleted))));
/// # Ok::<(), tessera::Error>(())
/// ```
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
/// let live = tasks.subscribe_query(&tasks.filter(Task::priority().gt(3)))?;
/// let Some(Event::Initial(first)) = live.recv_timeout(wait) else { panic!("no initial result") };
/// assert_eq!(first.len(), 1);
/// db.write(|tx| tasks.insert(tx, &Task { id: 2, priority: 9 }))?;
/// let change = live.recv_timeout(wait).and_then(Event::changed).expect("a change");
/// assert_eq!((change.insertions.as_slice(), change.result.len()), (&[1][..], 2));
/// assert!(change.deletions.is_empty() && change.modifications.is_empty() && !change.resynced);
/// # Ok::<(), tessera::Error>(())
/// ```
#[derive(Debug)]
pub struct ResultChange<T> {
    /// The commit this result reflects.
    pub sequence: u64,
    /// The whole result after the commit, in order.
    pub result: super::Results<T>,
    /// Indices in the previous result of records no longer in it.
    pub deletions: Vec<usize>,
    /// Indices in the new result of records new to it.
    pub insertions: Vec<usize>,
    /// Indices in the new result of records that stayed and changed.
    pub modifications: Vec<usize>,
    /// (previous index, new index) of records that stayed but moved: records whose sort key
    /// changed and whose order among the records that stayed changed with it (each is also in
    /// `modifications`). A record re-keyed in place, whose index shifts only for insertions and
    /// deletions around it, is a modification and not a move.
    pub moves: Vec<(usize, usize)>,
    /// The subscriber fell more than [`super::QUEUE_LEN_MAX`] deliveries behind under
    /// [`super::Policy::EveryChange`], and the deliveries it had not read were merged without
    /// the keys to diff them: `deletions` are then every previous row and `insertions` every
    /// row of `result`, so replacing the list with `result` is the whole update. Memory stays
    /// bounded however slow the subscriber; it never sees a stale intermediate state.
    pub resynced: bool,
    /// Length of the previous result.
    pub(super) base_len: usize,
    /// Primary keys of the previous and new results, for coalescing (latest-only policy).
    pub(super) keys: Option<Box<CoalesceKeys>>,
}

#[derive(Debug)]
pub(super) struct CoalesceKeys {
    pub(super) base: Vec<Box<[u8]>>,
    pub(super) new: Vec<Box<[u8]>>,
    pub(super) modified: HashSet<Box<[u8]>>,
}

impl<T> ResultChange<T> {
    /// Whether the change lists are all empty (only the first delivery of an empty result).
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
    /// let live = tasks.subscribe_query(&tasks.all())?;
    /// live.recv_timeout(wait); // the initial result
    /// db.write(|tx| tasks.insert(tx, &Task { id: 1, priority: 5 }))?;
    /// let change = live.recv_timeout(wait).and_then(Event::changed).expect("a change");
    /// assert!(!change.is_empty());
    /// # Ok::<(), tessera::Error>(())
    /// ```
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
                // A record that came into the result in either change may have left it before
                // and changed outside it, unseen (a limited window refilled): where the merged
                // change has it at both ends, it counts as modified.
                for (base, new) in [(&mine.base, &mine.new), (&theirs.base, &theirs.new)] {
                    let before: HashSet<&[u8]> = base.iter().map(|key| &**key).collect();
                    modified.extend(new.iter().filter(|key| !before.contains(&***key)).cloned());
                }
                let diff = diff_by_key(&mine.base, &theirs.new, &modified);
                (self.deletions, self.insertions, self.modifications, self.moves) = diff;
                self.keys = Some(Box::new(CoalesceKeys { base: mine.base, new: theirs.new, modified }));
            }
            _ => {
                // Without keys, the merged change reloads: everything out, everything in.
                self.resynced = true;
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

pub(super) type Diff = (Vec<usize>, Vec<usize>, Vec<usize>, Vec<(usize, usize)>);

/// Deletions, insertions, modifications and moves between two results given by primary key.
/// Records that stayed but are not on a longest increasing run of old positions moved.
pub(super) fn diff_by_key(old: &[Box<[u8]>], new: &[Box<[u8]>], modified: &HashSet<Box<[u8]>>) -> Diff {
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
    // The records that stayed in place: an increasing run of old positions, in new order, of
    // greatest weight, where a record whose value did not change outweighs every changed one.
    // Unchanged records keep their sort keys, hence their relative order, so they all stay on
    // the run and only changed records are named as moved (the changeset contract: moves are
    // also modifications). A plain longest run could name an unchanged record instead.
    let in_order = heaviest_increasing_run(&stayed, |(_, new_index)| !modified.contains(&new[*new_index]), old.len());
    let moves = stayed.iter().zip(&in_order).filter(|(_, ordered)| !**ordered).map(|(pair, _)| *pair).collect();
    (deletions, insertions, modifications, moves)
}

/// Which of `stayed` (pairs of old and new position, in new order) form the increasing run of
/// old positions of greatest weight, where each `heavy` pair outweighs all light ones
/// together. O(n log n): a Fenwick tree over old positions (below `old_len`) keeps the best run
/// ending at or below each position.
pub(super) fn heaviest_increasing_run(stayed: &[(usize, usize)], heavy: impl Fn(&(usize, usize)) -> bool, old_len: usize) -> Vec<bool> {
    let light_max = stayed.len() as u64 + 1; // more than every light pair together
    // tree[i]: the best (weight, index into `stayed`) of a run ending at an old position in
    // the range node i covers; (0, MAX) is no run.
    let mut tree: Vec<(u64, usize)> = vec![(0, usize::MAX); old_len + 1];
    let mut previous = vec![usize::MAX; stayed.len()];
    let mut best = (0u64, usize::MAX);
    for (index, pair) in stayed.iter().enumerate() {
        let old_position = pair.0;
        debug_assert!(old_position < old_len, "an old position within the old result");
        // The best run ending strictly before this old position.
        let mut before = (0u64, usize::MAX);
        let mut node = old_position; // positions 0..old_position are tree nodes 1..=old_position
        while node > 0 {
            before = before.max(tree[node]);
            node &= node - 1;
        }
        let weight = before.0 + if heavy(pair) { light_max } else { 1 };
        previous[index] = before.1;
        let entry = (weight, index);
        best = best.max(entry);
        let mut node = old_position + 1;
        while node <= old_len {
            tree[node] = tree[node].max(entry);
            node += node & node.wrapping_neg();
        }
    }
    let mut in_run = vec![false; stayed.len()];
    let mut cursor = best.1;
    while cursor != usize::MAX {
        in_run[cursor] = true;
        cursor = previous[cursor];
    }
    in_run
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(names: &str) -> Vec<Box<[u8]>> {
        names.bytes().map(|name| Box::from([name])).collect()
    }

    /// The moves of `old` → `new` when the records in `modified` changed.
    fn moves(old: &str, new: &str, modified: &str) -> Vec<(usize, usize)> {
        let modified: HashSet<Box<[u8]>> = keys(modified).into_iter().collect();
        diff_by_key(&keys(old), &keys(new), &modified).3
    }

    #[test]
    fn only_changed_records_are_named_as_moved() {
        // A changed and sorted after B: A moved, not B (a longest run could keep either, and
        // kept A, naming the unchanged B as moved).
        assert_eq!(moves("AB", "BA", "A"), [(0, 1)]);
        assert_eq!(moves("AB", "BA", "B"), [(1, 0)]);
        // Several changed records among unchanged ones, one inserted and one deleted.
        assert_eq!(moves("ABCDE", "BDXAEC", "AC"), [(0, 3), (2, 5)]);
        // Nothing changed place: no moves.
        assert!(moves("ABC", "ABC", "B").is_empty());
    }

    #[test]
    fn the_moves_turn_the_old_order_into_the_new_one() {
        // Whatever is modified, applying deletions, insertions and moves must give `new`.
        let old = keys("ABCDEFGH");
        for (new, modified) in [("HGFEDCBA", ""), ("BADCFEHG", "ACEG"), ("CAB", "C"), ("XAYBZ", "")] {
            let new = keys(new);
            let set: HashSet<Box<[u8]>> = keys(modified).into_iter().collect();
            let (deletions, insertions, _, moves) = diff_by_key(&old, &new, &set);
            // Records not moved, not deleted and not inserted keep their relative order.
            let moved: HashSet<usize> = moves.iter().map(|(from, _)| *from).collect();
            let fixed_old: Vec<&Box<[u8]>> =
                old.iter().enumerate().filter(|(i, _)| !deletions.contains(i) && !moved.contains(i)).map(|(_, k)| k).collect();
            let moved_new: HashSet<usize> = moves.iter().map(|(_, to)| *to).collect();
            let fixed_new: Vec<&Box<[u8]>> =
                new.iter().enumerate().filter(|(i, _)| !insertions.contains(i) && !moved_new.contains(i)).map(|(_, k)| k).collect();
            assert_eq!(fixed_old, fixed_new);
        }
    }
}
