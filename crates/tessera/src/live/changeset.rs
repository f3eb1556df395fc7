//! The changeset model: what a delivery tells a subscriber (an object's new version, or a
//! query result's deletions, insertions, modifications and moves), and how unread deliveries
//! coalesce.

use super::mailbox::Coalesce;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

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
