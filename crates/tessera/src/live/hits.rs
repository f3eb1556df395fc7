//! A commit's hits: the (query subscription, change) pairs the matcher finds, grouped by
//! subscription for the updates.
//!
//! The matcher reports the subscriptions of each changed version as runs of ids (a whole
//! subtree of the interval index at once; see `matcher`). The runs are kept as they come, each
//! subscription's hits counted, and then every hit written at its place in one buffer, where
//! each subscription's hits lie together in change order. A commit of the live table's case 3
//! finds 1.7 million pairs: appended one by one to a list per subscription, they cost 62
//! instructions each (callgrind) and a dozen reallocations per list.

/// A change that may affect a subscription: the change's index in its commit, and whether its
/// old and its new version were found under the subscription's anchor. Packed in 32 bits (the
/// index above two flag bits): a commit of the live table's case 3 records 1.7 million, and
/// their memory was a third of that commit's page faults at 16 bytes a hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Hit(u32);

impl Hit {
    /// The most changes of one commit that query subscriptions follow.
    pub(super) const CHANGES_MAX: usize = 1 << 30;

    /// Change `index` (below [`Hit::CHANGES_MAX`]), found through its old version, its new
    /// version, or both.
    pub(super) fn new(index: usize, old: bool, new: bool) -> Hit {
        assert!(index < Self::CHANGES_MAX, "change {index} of a commit: at most {} are followed", Self::CHANGES_MAX);
        Hit(((index as u32) << 2) | (u32::from(old) << 1) | u32::from(new))
    }

    /// The change's index in its commit.
    pub(super) fn index(self) -> usize {
        (self.0 >> 2) as usize
    }

    /// Whether the old version was found.
    pub(super) fn old(self) -> bool {
        self.0 & 0b10 != 0
    }

    /// Whether the new version was found.
    pub(super) fn new_version(self) -> bool {
        self.0 & 0b01 != 0
    }

    /// Adds `other`'s flags, a hit of the same change.
    pub(super) fn merge(&mut self, other: Hit) {
        debug_assert_eq!(self.index(), other.index(), "hits of one change");
        self.0 |= other.0 & 0b11;
    }
}

/// One commit's hits, as the matcher finds them.
pub(super) struct HitRuns<'m, 'c> {
    /// Runs of subscription ids, each with the hit every one of them gets, in the order found.
    runs: Vec<(&'m [u64], Hit)>,
    /// Hits found so far per subscription slot (the collection's, kept between commits and
    /// all zero then; put back to zero when the runs are grouped or dropped).
    counts: &'c mut [usize],
    /// The slots with hits, each once.
    touched: Vec<u32>,
}

/// A commit's hits by subscription: the slots with hits in increasing order, each with its
/// hits' range in `hits`, which holds one hit per change in change order.
pub(super) struct GroupedHits {
    hits: Vec<Hit>,
    slots: Vec<(u32, std::ops::Range<usize>)>,
}

impl<'m, 'c> HitRuns<'m, 'c> {
    /// Recording starts with `counts` all zero, one for each subscription slot.
    pub(super) fn new(counts: &'c mut [usize]) -> Self {
        debug_assert!(counts.iter().all(|count| *count == 0), "counts are zero between commits");
        HitRuns { runs: Vec::new(), counts, touched: Vec::new() }
    }

    /// Notes that each subscription of `ids` gets `hit`.
    #[inline]
    pub(super) fn record(&mut self, ids: &'m [u64], hit: Hit) {
        for &id in ids {
            let count = &mut self.counts[id as usize];
            if *count == 0 {
                self.touched.push(u32::try_from(id).expect("slot ids fit in 32 bits"));
            }
            *count += 1;
        }
        self.runs.push((ids, hit));
    }

    /// The hits grouped by subscription, with a subscription's hits of one change merged into
    /// one; the counts are zero again.
    pub(super) fn group(mut self) -> GroupedHits {
        let HitRuns { runs, counts, touched } = &mut self;
        touched.sort_unstable();
        // Each slot's count becomes where its hits start, and then, as they are written, where
        // its next one goes: its end at the last.
        let mut total = 0;
        for &slot in touched.iter() {
            let count = std::mem::replace(&mut counts[slot as usize], total);
            total += count;
        }
        let mut hits = vec![Hit::new(0, false, false); total];
        for &(ids, hit) in runs.iter() {
            for &id in ids {
                let next = &mut counts[id as usize];
                hits[*next] = hit;
                *next += 1;
            }
        }
        let mut slots = Vec::with_capacity(touched.len());
        let mut start = 0;
        for &slot in touched.iter() {
            let end = std::mem::take(&mut counts[slot as usize]);
            let kept = compact(&mut hits[start..end]);
            slots.push((slot, start..start + kept));
            start = end;
        }
        debug_assert_eq!(start, total, "every hit written once");
        // Every count is zero again: nothing is left for `drop` to clear.
        touched.clear();
        GroupedHits { hits, slots }
    }
}

impl Drop for HitRuns<'_, '_> {
    /// Runs dropped without grouping (a panic while matching) leave the counts at zero for the
    /// next commit.
    fn drop(&mut self) {
        for &slot in &self.touched {
            self.counts[slot as usize] = 0;
        }
    }
}

impl GroupedHits {
    /// The slots with hits, in increasing order, each with its hits in change order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (u64, &[Hit])> {
        self.slots.iter().map(|(slot, range)| (u64::from(*slot), &self.hits[range.clone()]))
    }

    /// The slots with hits in `first` or `second` (whose changes all come after `first`'s),
    /// in increasing order, each with its hits in both.
    pub(super) fn merged<'h>(first: &'h GroupedHits, second: Option<&'h GroupedHits>) -> Vec<(u64, SubHits<'h>)> {
        let a: Vec<(u64, &[Hit])> = first.iter().collect();
        let b: Vec<(u64, &[Hit])> = second.map(|second| second.iter().collect()).unwrap_or_default();
        let mut merged = Vec::with_capacity(a.len().max(b.len()));
        let (mut i, mut j) = (0, 0);
        while i < a.len() || j < b.len() {
            let slot_a = a.get(i).map_or(u64::MAX, |(slot, _)| *slot);
            let slot_b = b.get(j).map_or(u64::MAX, |(slot, _)| *slot);
            let slot = slot_a.min(slot_b);
            let from_a = if slot_a == slot {
                i += 1;
                a[i - 1].1
            } else {
                &[]
            };
            let from_b = if slot_b == slot {
                j += 1;
                b[j - 1].1
            } else {
                &[]
            };
            merged.push((slot, SubHits(from_a, from_b)));
        }
        merged
    }
}

/// One subscription's hits in a commit, in change order, one per change: those of the
/// changes matched first, then those of the later changes a second thread matched (empty when
/// one thread matched the whole commit).
#[derive(Clone, Copy)]
pub(super) struct SubHits<'h>(pub(super) &'h [Hit], pub(super) &'h [Hit]);

impl SubHits<'_> {
    pub(super) fn len(&self) -> usize {
        self.0.len() + self.1.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = Hit> + '_ {
        self.0.iter().chain(self.1).copied()
    }
}

/// Puts one subscription's hits in change order, one per change (the flags of a change's
/// hits merged), at the front of `list`; returns how many there are. A change found through
/// both its versions has them next to each other (both versions are looked up before the next
/// change); only a subscription anchored on several fields (an `or`) needs the sort.
fn compact(list: &mut [Hit]) -> usize {
    let in_change_order = |list: &[Hit]| list.is_sorted_by(|earlier, later| earlier.index() < later.index());
    if in_change_order(list) {
        return list.len(); // the common case: each change found through one of its versions
    }
    let merge_neighbours = |list: &mut [Hit]| {
        let mut kept: usize = 0;
        for position in 0..list.len() {
            let hit = list[position];
            match kept.checked_sub(1).map(|last| &mut list[last]) {
                Some(last) if last.index() == hit.index() => last.merge(hit),
                _ => {
                    list[kept] = hit;
                    kept += 1;
                }
            }
        }
        kept
    };
    let kept = merge_neighbours(list);
    let list = &mut list[..kept];
    if in_change_order(list) {
        return kept;
    }
    list.sort_unstable_by_key(|hit| hit.index());
    merge_neighbours(list)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn grouping_gives_each_subscription_its_hits_once_per_change_in_change_order() {
        let mut next = crate::live::test_rng(0x2545_f491_4f6c_dd1d);
        let slots = 40;
        let mut counts = vec![0; slots];
        for case in 0..300 {
            // Runs as the matcher reports them: change by change, the old version's runs then
            // the new one's; a second pass over the changes stands for a second anchored field
            // (hits out of change order, repeated changes).
            let fields = 1 + (case % 2);
            let changes = (next() % 20) as usize;
            let ids: Vec<u64> = (0..200).map(|_| next() % slots as u64).collect();
            let mut runs: Vec<(std::ops::Range<usize>, Hit)> = Vec::new();
            for _ in 0..fields {
                for change in 0..changes {
                    for (old, new) in [(true, false), (false, true)] {
                        for _ in 0..next() % 3 {
                            let start = (next() % 200) as usize;
                            let end = (start + (next() % 6) as usize).min(200);
                            runs.push((start..end, Hit::new(change, old, new)));
                        }
                    }
                }
            }
            // The oracle: per slot, per change, the flags or-ed together.
            let mut expected: BTreeMap<u64, BTreeMap<usize, (bool, bool)>> = BTreeMap::new();
            for (range, hit) in &runs {
                for &id in &ids[range.clone()] {
                    let flags = expected.entry(id).or_default().entry(hit.index()).or_default();
                    flags.0 |= hit.old();
                    flags.1 |= hit.new_version();
                }
            }
            let mut recorder = HitRuns::new(&mut counts);
            for (range, hit) in &runs {
                recorder.record(&ids[range.clone()], *hit);
            }
            let grouped = recorder.group();
            let found: BTreeMap<u64, BTreeMap<usize, (bool, bool)>> = grouped
                .iter()
                .map(|(slot, hits)| {
                    assert!(hits.is_sorted_by(|a, b| a.index() < b.index()), "case {case}: slot {slot}'s hits in change order, once each");
                    (slot, hits.iter().map(|hit| (hit.index(), (hit.old(), hit.new_version()))).collect())
                })
                .collect();
            assert_eq!(found, expected, "case {case}");
            assert!(grouped.iter().map(|(slot, _)| slot).is_sorted_by(|a, b| a < b), "slots in increasing order");
            assert!(counts.iter().all(|count| *count == 0), "case {case}: counts back at zero");
        }
    }

    #[test]
    fn two_threads_groups_merge_by_slot_the_first_threads_hits_first() {
        let mut counts = vec![0; 8];
        let group = |counts: &mut Vec<usize>, runs: &[(&'static [u64], usize)]| {
            let mut recorder = HitRuns::new(counts);
            for (ids, change) in runs {
                recorder.record(ids, Hit::new(*change, false, true));
            }
            recorder.group()
        };
        let first = group(&mut counts, &[(&[1, 3], 0), (&[3, 6], 1)]);
        let second = group(&mut counts, &[(&[0, 3], 5), (&[7], 6)]);
        let changes = |hits: SubHits<'_>| hits.iter().map(Hit::index).collect::<Vec<_>>();
        let merged: Vec<(u64, Vec<usize>)> =
            GroupedHits::merged(&first, Some(&second)).into_iter().map(|(slot, hits)| (slot, changes(hits))).collect();
        assert_eq!(merged, vec![(0, vec![5]), (1, vec![0]), (3, vec![0, 1, 5]), (6, vec![1]), (7, vec![6])]);
        let alone: Vec<(u64, Vec<usize>)> =
            GroupedHits::merged(&first, None).into_iter().map(|(slot, hits)| (slot, changes(hits))).collect();
        assert_eq!(alone, vec![(1, vec![0]), (3, vec![0, 1]), (6, vec![1])]);
    }

    #[test]
    fn runs_dropped_without_grouping_leave_the_counts_at_zero() {
        let mut counts = vec![0; 8];
        let ids = [1, 5, 5, 7];
        let mut recorder = HitRuns::new(&mut counts);
        recorder.record(&ids, Hit::new(3, true, false));
        drop(recorder);
        assert_eq!(counts, vec![0; 8]);
    }

    #[test]
    fn a_hit_keeps_its_change_and_flags_and_merges_flags_only() {
        for index in [0, 1, 2, 1_000, Hit::CHANGES_MAX - 1] {
            for (old, new) in [(false, false), (true, false), (false, true), (true, true)] {
                let hit = Hit::new(index, old, new);
                assert_eq!((hit.index(), hit.old(), hit.new_version()), (index, old, new));
                let mut merged = Hit::new(index, false, false);
                merged.merge(hit);
                assert_eq!(merged, hit, "merging into a hit without flags gives the other's flags");
            }
        }
        let mut both = Hit::new(7, true, false);
        both.merge(Hit::new(7, false, true));
        assert_eq!((both.index(), both.old(), both.new_version()), (7, true, true));
    }

    #[test]
    #[should_panic(expected = "at most")]
    fn a_change_index_past_the_limit_is_refused() {
        Hit::new(Hit::CHANGES_MAX, true, true);
    }
}
