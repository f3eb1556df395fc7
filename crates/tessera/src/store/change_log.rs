//! A write transaction's change log: what each key was before the transaction and is after
//! it, recorded while someone needs the changes (the durable feed, a listener, a live
//! subscription).
//!
//! The values are copied into one growing byte buffer and the keys into another, and each
//! changed key has a small fixed-size [`Entry`] of offsets into them, so a recorded write costs
//! a copy and a hash, never an allocation of its own. The keys have their own buffer so that a
//! walk of a large commit's keys (the live engine's matching) reads them one after the other,
//! not one cache miss each between the values. A key changed twice has one entry, found through a hash
//! table of entry numbers: the entry keeps its first old value and takes the last new one. A key
//! new to the store, written before the transaction deletes anything, cannot have an entry yet:
//! it is added without a lookup, and hashed into the table only when a later write needs one.
//! [`ChangeLog::finish`] gives each entry its kind, or drops it (written back to its old
//! value, or inserted then deleted). The durable feed encodes straight from the buffer
//! ([`ChangeLog::changes_of`]); a committed log moves whole into the in-process feed
//! ([`super::published::Published`]), whose hooks read it in place ([`ChangeLog::changes`]),
//! and owned [`Change`]s are made from it only for listeners ([`ChangeLog::to_changes`]), on
//! the delivering thread.
//!
//! A log for the durable feed alone (no in-process listener, no cross-process notification)
//! keeps no old values ([`ChangeLog::start`]): the feed's entries hold each key's new value
//! only. It records whether each key had a value, and compares a first write's old and new
//! bytes before the write, so a key written once with the bytes it had still drops out. A key
//! written twice that ends as it began stays an update there (its first old value is gone by
//! then): the entry names the value the key has, which is true, and a consumer applies it as a
//! no-op. Such a log is never handed to in-process listeners ([`ChangeLog::keeps_old_values`]).
//!
//! The table hashes with foldhash seeded at random per log (a transaction's keys may come
//! from outside): keys crafted without the seed cannot make one transaction's log quadratic,
//! and the seed lives only as long as the transaction, which never shows a hash.

use super::feed::{Change, ChangeKind};
use super::feed_entry::varint_len;
use std::cell::RefCell;
use std::hash::BuildHasher;
use std::sync::Arc;

/// Most memory a thread keeps of its last change log for the next (see [`ChangeLog::start`]):
/// a commit of 10,000 records of 100 bytes fills about 2.5 MiB.
const KEPT_BYTES_MAX: usize = 8 * 1024 * 1024;

thread_local! {
    /// This thread's last change log, emptied, its memory kept (see [`ChangeLog::start`]).
    static KEPT: RefCell<Option<ChangeLog>> = const { RefCell::new(None) };
}

/// A log the feed delivered and gave back ([`ChangeLog::give_back`]), for whichever thread
/// writes next: a log published to the feed leaves its writer's thread.
static SPARE: std::sync::Mutex<Option<ChangeLog>> = std::sync::Mutex::new(None);

/// A run of bytes in [`ChangeLog::bytes`] (a value) or [`ChangeLog::keys`] (a key).
#[derive(Debug, Clone, Copy)]
struct Span {
    start: usize,
    len: usize,
}

/// One changed key.
#[derive(Debug)]
struct Entry {
    /// Index in [`ChangeLog::keyspaces`].
    keyspace: u32,
    /// In [`ChangeLog::keys`].
    key: Span,
    /// The value before the transaction (`None`: the key did not exist). In a log that keeps
    /// no old values, [`OLD_NOT_KEPT`] for a key that had one.
    old: Option<Span>,
    /// The value now (`None`: deleted).
    new: Option<Span>,
    /// Set by [`ChangeLog::finish`]; `None` for a change that dropped out.
    kind: Option<ChangeKind>,
    /// `old` and `new` are both there with the same bytes: compared when `new` is recorded,
    /// while both are in the cache (a pass over a large commit's values in `finish` read them
    /// back from memory, 35 ns a change: most of the commit's time with subscriptions).
    unchanged: bool,
}

/// The `old` of an entry whose key had a value, in a log that keeps no old values.
const OLD_NOT_KEPT: Span = Span { start: 0, len: 0 };

/// A change in the log, borrowed: what the durable feed encodes. `old` is `None` for every
/// change of a log that keeps no old values ([`ChangeLog::keeps_old_values`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ChangeView<'a> {
    pub(crate) keyspace: &'a str,
    pub(crate) key: &'a [u8],
    pub(crate) kind: ChangeKind,
    pub(crate) old: Option<&'a [u8]>,
    pub(crate) new: Option<&'a [u8]>,
}

impl Change {
    /// This change, borrowed (see [`ChangeView`]).
    pub(crate) fn view(&self) -> ChangeView<'_> {
        ChangeView { keyspace: &self.keyspace, key: &self.key, kind: self.kind, old: self.old.as_deref(), new: self.new.as_deref() }
    }
}

/// A key's old value copied before a write that may overwrite it in place (LMDB reuses the
/// page), to be recorded with [`ChangeLog::record_staged`] once the write succeeded.
pub(crate) struct Staged(StagedKey);

enum StagedKey {
    /// The key already has an entry: its old value is the one recorded first.
    Known(usize),
    /// The key's first change; its hash, its old value, and whether the write puts back the
    /// very bytes the key has (compared before the write, while both are at hand).
    First { hash: u64, keyspace: u32, old: Option<Span>, unchanged: bool },
}

/// See the module docs.
pub(crate) struct ChangeLog {
    /// The keyspaces the entries name; a transaction writes a handful.
    keyspaces: Vec<Arc<str>>,
    /// Every recorded value, one after the other.
    bytes: Vec<u8>,
    /// Every recorded key, one after the other.
    keys: Vec<u8>,
    entries: Vec<Entry>,
    /// Each entry's hash (of keyspace index and key) and index in `entries`; the hash is kept
    /// so that growing the table never hashes a key again.
    positions: hashbrown::HashTable<(u64, usize)>,
    /// `entries[..indexed]` are in `positions`; the others were recorded by
    /// [`ChangeLog::record_new`] without a lookup, and are added by the next lookup.
    indexed: usize,
    /// A delete has been recorded: from then on a key new to the store may have an entry (it
    /// was deleted earlier in the transaction), and [`ChangeLog::record_new`] looks it up.
    deleted: bool,
    /// Old values are copied (see the module docs): false for the durable feed alone.
    keeps_old_values: bool,
    hasher: foldhash::fast::RandomState,
    /// By keyspace index: what its changes add to a durable-feed entry, summed by
    /// [`ChangeLog::finish`] while it walks the entries (see [`KeyspaceTotals`]).
    totals: Vec<KeyspaceTotals>,
    /// Changes left after [`ChangeLog::finish`], counted while it walks the entries.
    len: usize,
}

/// One keyspace's changes after [`ChangeLog::finish`], summed for sizing a durable-feed entry
/// (`feed_entry::size_of_log`) without a pass over the changes of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeyspaceTotals {
    /// Changes left after `finish`.
    pub(crate) count: usize,
    /// Their keys and new values, each with its varint length: what a feed entry holds of
    /// them besides each change's head.
    pub(crate) body_bytes: usize,
    /// Position in the log of the keyspace's first change left (`usize::MAX` for none): a
    /// feed entry names its keyspaces in the order their first change comes.
    pub(crate) first: usize,
}

const NO_CHANGE: KeyspaceTotals = KeyspaceTotals { count: 0, body_bytes: 0, first: usize::MAX };

impl Default for ChangeLog {
    fn default() -> Self {
        ChangeLog {
            keyspaces: Vec::new(),
            bytes: Vec::new(),
            keys: Vec::new(),
            entries: Vec::new(),
            positions: hashbrown::HashTable::new(),
            indexed: 0,
            deleted: false,
            keeps_old_values: true,
            hasher: foldhash::fast::RandomState::default(),
            totals: Vec::new(),
            len: 0,
        }
    }
}

impl ChangeLog {
    /// An empty log for a write transaction: this thread's last one, with the memory it grew
    /// to (at most [`KEPT_BYTES_MAX`]), and a fresh hash seed. A large commit's log would
    /// otherwise take fresh pages from the system each time, one fault per 4 KiB (a third of
    /// the log's cost, measured with `feed_parts`).
    ///
    /// `keep_old_values`: whether the log copies each key's value before its first write, for
    /// in-process listeners and cross-process notification. The durable feed alone needs only
    /// the new values; without the copies an update's log takes half the bytes.
    pub(crate) fn start(keep_old_values: bool) -> ChangeLog {
        let kept =
            KEPT.with(|kept| kept.borrow_mut().take()).or_else(|| SPARE.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take());
        let mut log = kept.unwrap_or_default();
        log.hasher = foldhash::fast::RandomState::default();
        log.keeps_old_values = keep_old_values;
        log
    }

    /// Whether the log copies old values (see [`ChangeLog::start`]): only such a log may be
    /// handed to in-process listeners, whose changes carry them.
    pub(crate) fn keeps_old_values(&self) -> bool {
        self.keeps_old_values
    }

    /// Empties the log and keeps it for this thread's next write transaction, unless it holds
    /// more than [`KEPT_BYTES_MAX`].
    pub(crate) fn keep(self) {
        if let Some(emptied) = self.emptied() {
            // `try_with`: a thread being torn down keeps nothing.
            let _ = KEPT.try_with(|kept| *kept.borrow_mut() = Some(emptied));
        }
    }

    /// Empties the log and keeps it for the next write transaction of any thread (a log the
    /// feed has delivered), unless it holds more than [`KEPT_BYTES_MAX`].
    pub(crate) fn give_back(self) {
        if let Some(emptied) = self.emptied() {
            *SPARE.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(emptied);
        }
    }

    /// The log emptied with its memory, or `None` if it holds more than [`KEPT_BYTES_MAX`].
    fn emptied(mut self) -> Option<ChangeLog> {
        let bytes = self.bytes.capacity()
            + self.keys.capacity()
            + self.entries.capacity() * std::mem::size_of::<Entry>()
            + self.positions.capacity() * std::mem::size_of::<(u64, usize)>();
        if bytes > KEPT_BYTES_MAX {
            return None;
        }
        self.keyspaces.clear();
        self.bytes.clear();
        self.keys.clear();
        self.entries.clear();
        self.positions.clear();
        self.indexed = 0;
        self.deleted = false;
        self.keeps_old_values = true;
        self.totals.clear();
        self.len = 0;
        Some(self)
    }

    fn keyspace_index(&mut self, keyspace: &Arc<str>) -> u32 {
        // The last one first: a transaction usually writes one keyspace many times.
        if let Some(last) = self.keyspaces.last()
            && Arc::ptr_eq(last, keyspace)
        {
            return (self.keyspaces.len() - 1) as u32;
        }
        // Two handles of one keyspace may hold two copies of its name: compare the text too.
        match self.keyspaces.iter().position(|known| Arc::ptr_eq(known, keyspace) || **known == **keyspace) {
            Some(index) => index as u32,
            None => {
                self.keyspaces.push(keyspace.clone());
                (self.keyspaces.len() - 1) as u32
            }
        }
    }

    fn push_bytes(&mut self, bytes: &[u8]) -> Span {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(bytes);
        Span { start, len: bytes.len() }
    }

    fn slice(&self, span: Span) -> &[u8] {
        &self.bytes[span.start..span.start + span.len]
    }

    fn push_key(&mut self, key: &[u8]) -> Span {
        let start = self.keys.len();
        self.keys.extend_from_slice(key);
        Span { start, len: key.len() }
    }

    fn key_of(&self, entry: &Entry) -> &[u8] {
        &self.keys[entry.key.start..entry.key.start + entry.key.len]
    }

    /// Adds the entries [`ChangeLog::record_new`] recorded without a lookup to `positions`.
    fn index_pending(&mut self) {
        for index in self.indexed..self.entries.len() {
            let entry = &self.entries[index];
            let key = self.key_of(entry);
            let hash = self.hasher.hash_one((entry.keyspace, key));
            self.positions.insert_unique(hash, (hash, index), |&(entry_hash, _)| entry_hash);
        }
        self.indexed = self.entries.len();
    }

    fn find(&self, keyspace: u32, key: &[u8]) -> (u64, Option<usize>) {
        debug_assert_eq!(self.indexed, self.entries.len(), "a lookup sees every entry");
        let hash = self.hasher.hash_one((keyspace, key));
        let same = |&(entry_hash, index): &(u64, usize)| {
            let entry = &self.entries[index];
            entry_hash == hash && entry.keyspace == keyspace && self.key_of(entry) == key
        };
        (hash, self.positions.find(hash, same).map(|&(_, index)| index))
    }

    /// Copies `old`, `key`'s value before a write of `new` (`None`: a delete), unless the key
    /// has an entry already. A log that keeps no old values notes only that there was one (and
    /// its caller may pass any bytes for a value it did not read: see
    /// [`ChangeLog::keeps_old_values`]).
    pub(crate) fn stage(&mut self, keyspace: &Arc<str>, key: &[u8], old: Option<&[u8]>, new: Option<&[u8]>) -> Staged {
        self.index_pending();
        let keyspace = self.keyspace_index(keyspace);
        match self.find(keyspace, key) {
            (_, Some(index)) => Staged(StagedKey::Known(index)),
            (hash, None) => {
                let unchanged = matches!((old, new), (Some(old), Some(new)) if old == new);
                let old = match self.keeps_old_values {
                    true => old.map(|old| self.push_bytes(old)),
                    false => old.map(|_| OLD_NOT_KEPT),
                };
                Staged(StagedKey::First { hash, keyspace, old, unchanged })
            }
        }
    }

    /// Records a write that succeeded: `key` (the one staged) now has the value `new`
    /// (`None`: deleted), the `new` given to [`ChangeLog::stage`].
    pub(crate) fn record_staged(&mut self, staged: Staged, key: &[u8], new: Option<&[u8]>) {
        self.deleted |= new.is_none();
        let new = new.map(|new| self.push_bytes(new));
        match staged.0 {
            StagedKey::Known(index) => {
                // Without the first old value, a key written twice stays a change.
                let old = self.entries[index].old.filter(|_| self.keeps_old_values);
                let unchanged = matches!((old, new), (Some(old), Some(new)) if self.slice(old) == self.slice(new));
                let entry = &mut self.entries[index];
                (entry.new, entry.unchanged) = (new, unchanged);
            }
            StagedKey::First { hash, keyspace, old, unchanged } => {
                self.index_pending();
                let key = self.push_key(key);
                let index = self.entries.len();
                self.positions.insert_unique(hash, (hash, index), |&(entry_hash, _)| entry_hash);
                self.entries.push(Entry { keyspace, key, old, new, kind: None, unchanged });
                self.indexed = self.entries.len();
            }
        }
    }

    /// Records a write that succeeded, of a key the caller knows had no value before it (an
    /// insert that LMDB refused to overwrite, or an append past the last key).
    ///
    /// Until the transaction deletes something, such a key has no entry yet (an entry's new
    /// value is the key's current one, and the key had none), so none is looked for, and the
    /// entry is hashed only if a later write needs a lookup: a transaction of inserts alone
    /// never hashes its keys.
    pub(crate) fn record_new(&mut self, keyspace: &Arc<str>, key: &[u8], new: &[u8]) {
        if self.deleted {
            let staged = self.stage(keyspace, key, None, Some(new));
            self.record_staged(staged, key, Some(new));
            return;
        }
        let keyspace = self.keyspace_index(keyspace);
        let new = Some(self.push_bytes(new));
        let key = self.push_key(key);
        self.entries.push(Entry { keyspace, key, old: None, new, kind: None, unchanged: false });
    }

    /// Gives each entry its kind; a key written back to its old value, or inserted then
    /// deleted, drops out. Sums each keyspace's changes on the way, for sizing a feed entry
    /// ([`ChangeLog::totals`]).
    pub(crate) fn finish(mut self) -> ChangeLog {
        self.totals.clear();
        self.totals.resize(self.keyspaces.len(), NO_CHANGE);
        self.len = 0;
        for (position, entry) in self.entries.iter_mut().enumerate() {
            entry.kind = match (entry.old, entry.new) {
                (None, Some(_)) => Some(ChangeKind::Insert),
                (Some(_), Some(_)) if !entry.unchanged => Some(ChangeKind::Update),
                (Some(_), None) => Some(ChangeKind::Delete),
                _ => None,
            };
            if entry.kind.is_some() {
                self.len += 1;
                let totals = &mut self.totals[entry.keyspace as usize];
                totals.count += 1;
                totals.body_bytes +=
                    varint_len(entry.key.len as u64) + entry.key.len + entry.new.map_or(0, |new| varint_len(new.len as u64) + new.len);
                totals.first = totals.first.min(position);
            }
        }
        self
    }

    /// Each keyspace's name and [`KeyspaceTotals`], in the order the log first recorded them
    /// (after [`ChangeLog::finish`]; keyspaces whose changes all dropped out have a count of 0).
    pub(crate) fn totals(&self) -> impl Iterator<Item = (&str, KeyspaceTotals)> + '_ {
        debug_assert_eq!(self.totals.len(), self.keyspaces.len(), "finish summed every keyspace");
        self.keyspaces.iter().map(|name| &**name).zip(self.totals.iter().copied())
    }

    /// The changes after [`ChangeLog::finish`], in the order the transaction first made them.
    pub(crate) fn changes(&self) -> impl DoubleEndedIterator<Item = ChangeView<'_>> + Clone {
        self.changes_of(|_| true)
    }

    /// The changes after [`ChangeLog::finish`] to the keyspaces `kept` keeps, in the order the
    /// transaction first made them; `kept` is asked once per keyspace (a transaction writes a
    /// handful), not once per change.
    pub(crate) fn changes_of(&self, kept: impl Fn(&str) -> bool) -> impl DoubleEndedIterator<Item = ChangeView<'_>> + Clone {
        let kept: Vec<bool> = self.keyspaces.iter().map(|name| kept(name)).collect();
        self.entries.iter().filter_map(move |entry| {
            if !kept[entry.keyspace as usize] {
                return None;
            }
            Some(ChangeView {
                keyspace: &self.keyspaces[entry.keyspace as usize],
                key: self.key_of(entry),
                kind: entry.kind?,
                old: entry.old.filter(|_| self.keeps_old_values).map(|old| self.slice(old)),
                new: entry.new.map(|new| self.slice(new)),
            })
        })
    }

    /// How many changes are left after [`ChangeLog::finish`] (a key written back to its old
    /// value, or inserted then deleted, is none), without a walk of them.
    pub(crate) fn len(&self) -> usize {
        debug_assert_eq!(self.len, self.entries.iter().filter(|entry| entry.kind.is_some()).count(), "counted by finish");
        self.len
    }

    /// Whether no change is left after [`ChangeLog::finish`].
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The changes after [`ChangeLog::finish`], owned: a batch for in-process listeners.
    pub(crate) fn to_changes(&self) -> Vec<Change> {
        assert!(self.keeps_old_values, "a log without old values is never given to listeners");
        let owned = |entry: &Entry| {
            Some(Change {
                keyspace: self.keyspaces[entry.keyspace as usize].clone(),
                key: self.key_of(entry).into(),
                kind: entry.kind?,
                old: entry.old.map(|old| self.slice(old).into()),
                new: entry.new.map(|new| self.slice(new).into()),
            })
        };
        self.entries.iter().filter_map(owned).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// One write as a transaction makes it: keyspace, key, the value stored before the write
    /// (what the transaction reads), and the value after (`None`: a delete).
    type Write = (usize, Vec<u8>, Option<Vec<u8>>);

    /// A change as the tests compare it: keyspace, key, kind, old and new value.
    type Owned = (String, Vec<u8>, ChangeKind, Option<Vec<u8>>, Option<Vec<u8>>);

    /// The naive oracle: replays the writes over the state before, then compares each touched
    /// key's value before and after the whole transaction. Without old values (`keep_old_values`
    /// false) no change has one, and a key written more than once stays a change even when it
    /// ends as it began (see the module docs).
    fn oracle(names: &[Arc<str>], before: &BTreeMap<(usize, Vec<u8>), Vec<u8>>, writes: &[Write], keep_old_values: bool) -> Vec<Owned> {
        let mut after = before.clone();
        let mut order: Vec<(usize, Vec<u8>)> = Vec::new();
        let mut writes_of: BTreeMap<(usize, Vec<u8>), usize> = BTreeMap::new();
        for (keyspace, key, new) in writes {
            let id = (*keyspace, key.clone());
            // Deleting a missing key changes nothing: it does not place the key in the order.
            let changes_something = new.is_some() || after.contains_key(&id);
            if changes_something {
                if !order.contains(&id) {
                    order.push(id.clone());
                }
                *writes_of.entry(id.clone()).or_default() += 1;
            }
            match new {
                Some(value) => after.insert(id, value.clone()),
                None => after.remove(&id),
            };
        }
        order
            .into_iter()
            .filter_map(|id| {
                let (old, new) = (before.get(&id).cloned(), after.get(&id).cloned());
                let written_back = old == new && (keep_old_values || writes_of[&id] == 1);
                let kind = match (&old, &new) {
                    (None, Some(_)) => ChangeKind::Insert,
                    (Some(_), Some(_)) if !written_back => ChangeKind::Update,
                    (Some(_), None) => ChangeKind::Delete,
                    _ => return None,
                };
                let old = old.filter(|_| keep_old_values);
                Some((names[id.0].to_string(), id.1, kind, old, new))
            })
            .collect()
    }

    /// Records `writes` as the write path does: stage with the value stored now, then record.
    fn logged(names: &[Arc<str>], before: &BTreeMap<(usize, Vec<u8>), Vec<u8>>, writes: &[Write], keep_old_values: bool) -> ChangeLog {
        let mut state = before.clone();
        let mut log = ChangeLog { keeps_old_values: keep_old_values, ..ChangeLog::default() };
        for (keyspace, key, new) in writes {
            let id = (*keyspace, key.clone());
            // A delete of a missing key records nothing, as `WriteTxn::delete` does.
            if new.is_none() && !state.contains_key(&id) {
                continue;
            }
            // Each keyspace through a fresh `Arc` now and then, as two handles would hold it.
            let name: Arc<str> = if key.len() % 2 == 0 { names[*keyspace].clone() } else { names[*keyspace].to_string().into() };
            match (state.get(&id), new) {
                // A key absent from the store, written as `WriteTxn::insert_new` does.
                (None, Some(value)) if value.len() % 2 == 0 => log.record_new(&name, key, value),
                // A delete without old values, as `WriteTxn::delete` stages it: no read.
                (Some(_), None) if !keep_old_values => {
                    let staged = log.stage(&name, key, Some(b"not read"), None);
                    log.record_staged(staged, key, None);
                }
                (old, new) => {
                    let staged = log.stage(&name, key, old.map(Vec::as_slice), new.as_deref());
                    log.record_staged(staged, key, new.as_deref());
                }
            }
            match new {
                Some(value) => state.insert(id, value.clone()),
                None => state.remove(&id),
            };
        }
        log.finish()
    }

    #[test]
    fn the_log_agrees_with_a_replay_of_random_transactions() {
        let names: Vec<Arc<str>> = vec!["a".into(), "b".into(), "c".into()];
        let mut rng = fastrand::Rng::with_seed(19);
        for round in 0..4_000 {
            let keep_old_values = round % 2 == 0;
            // Few keys and values, so that keys repeat and values come back.
            let key = |rng: &mut fastrand::Rng| vec![b'k'; rng.usize(1..4)];
            let value = |rng: &mut fastrand::Rng| vec![rng.u8(0..3); rng.usize(0..3)];
            let mut before = BTreeMap::new();
            for _ in 0..rng.usize(0..6) {
                before.insert((rng.usize(0..3), key(&mut rng)), value(&mut rng));
            }
            let writes: Vec<Write> = (0..rng.usize(0..12))
                .map(|_| (rng.usize(0..3), key(&mut rng), if rng.u8(0..4) == 0 { None } else { Some(value(&mut rng)) }))
                .collect();
            let log = logged(&names, &before, &writes, keep_old_values);
            let got: Vec<Owned> = log
                .changes()
                .map(|c| (c.keyspace.to_string(), c.key.to_vec(), c.kind, c.old.map(<[u8]>::to_vec), c.new.map(<[u8]>::to_vec)))
                .collect();
            let expected = oracle(&names, &before, &writes, keep_old_values);
            assert_eq!(got, expected, "keep old values {keep_old_values}, before {before:?}, writes {writes:?}");
            if keep_old_values {
                let owned: Vec<_> = log.to_changes();
                assert_eq!(owned.iter().map(Change::view).collect::<Vec<_>>(), log.changes().collect::<Vec<_>>());
            }
            assert_eq!((log.len(), log.is_empty()), (expected.len(), expected.is_empty()));
        }
    }

    #[test]
    fn changes_of_keeps_the_keyspaces_asked_for_in_order() {
        let (a, b): (Arc<str>, Arc<str>) = ("a".into(), "b".into());
        let mut log = ChangeLog::default();
        log.record_new(&a, b"1", b"x");
        log.record_new(&b, b"2", b"y");
        log.record_new(&a, b"3", b"z");
        let log = log.finish();
        let keys: Vec<&[u8]> = log.changes_of(|name| name == "a").map(|change| change.key).collect();
        assert_eq!(keys, [&b"1"[..], &b"3"[..]]);
        assert_eq!(log.changes_of(|_| false).count(), 0);
        assert_eq!(log.changes_of(|_| true).collect::<Vec<_>>(), log.changes().collect::<Vec<_>>());
    }

    #[test]
    fn a_key_written_back_to_its_old_value_drops_out_and_one_written_twice_appears_once() {
        let ks: Arc<str> = "ks".into();
        let mut log = ChangeLog::default();
        let staged = log.stage(&ks, b"k", Some(b"v0"), Some(b"v1"));
        log.record_staged(staged, b"k", Some(b"v1"));
        let staged = log.stage(&ks, b"k", Some(b"v1"), Some(b"v0"));
        log.record_staged(staged, b"k", Some(b"v0"));
        log.record_new(&ks, b"n", b"x");
        let staged = log.stage(&ks, b"n", Some(b"x"), Some(b"y"));
        log.record_staged(staged, b"n", Some(b"y"));
        let log = log.finish();
        let changes: Vec<ChangeView<'_>> = log.changes().collect();
        assert_eq!(changes, [ChangeView { keyspace: "ks", key: b"n", kind: ChangeKind::Insert, old: None, new: Some(b"y") }]);
    }
}
