//! The durable change feed: each commit's net changes, appended to the keyspace `tessera.feed`
//! in the same transaction, readable after restarts and from other processes, with named
//! consumers whose cursors are kept in `tessera.feed.consumers` (see `docs/storage.md`,
//! "Durable change feed").
//!
//! Opt-in per file: [`DbOptions::durable_feed`](super::DbOptions::durable_feed) turns it on,
//! and from then on every writer of the file appends (the mark is in `tessera.meta`, and a
//! process that opened the file before looks for it at each of its writes).
//!
//! [`DbOptions::cross_process_notify`](super::DbOptions::cross_process_notify) is kept the same
//! way: once one opener turns it on, the file has the mark [`META_NOTIFY_KEY`], and every
//! writer from then on records old values in `tessera.feed.old` and wakes the other processes,
//! whatever its own options say; a process that opened the file before finds the mark at its
//! next write. So no writer can leave the others' subscriptions with a gap by having opened the
//! file without the option.

use super::change_log::{ChangeLog, ChangeView};
use super::feed::{ChangeBatch, ChangeKind};
use super::feed_entry::{self, Fields, decode};
use super::{Db, Keyspace, META_KEYSPACE, ReadTxn, Snapshot, WriteTxn};
use crate::error::{Error, Result};
use std::ops::Bound;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The feed's entries: commit sequence (8 bytes, big-endian) → the commit's changes.
pub(crate) const FEED_KEYSPACE: &str = "tessera.feed";
/// Consumers' cursors: consumer name → the last sequence it acknowledged (8 bytes, big-endian).
pub(crate) const CONSUMERS_KEYSPACE: &str = "tessera.feed.consumers";
/// The old values of the commits whose writer had cross-process notification on: commit
/// sequence (8 bytes, big-endian) → the old value of each change of its `tessera.feed` entry,
/// in the same order (see [`encode_olds`]). Removed with the feed entry.
pub(crate) const OLDS_KEYSPACE: &str = "tessera.feed.old";
/// In `tessera.meta`: present once the feed is on; its value is the highest sequence that
/// retention has removed (8 bytes, big-endian; 0 for none).
pub(crate) const META_FEED_KEY: &[u8] = b"durable_feed";
/// In `tessera.meta`: present once cross-process notification is on for the file (an empty
/// value); every writer then records old values and wakes the others (see the module docs).
pub(crate) const META_NOTIFY_KEY: &[u8] = b"cross_process_notify";

/// Longest consumer name, in bytes.
///
/// ```
/// use tessera::store::CONSUMER_NAME_LEN_MAX;
/// use tessera::{Db, DbOptions};
/// # let dir = tempfile::tempdir().unwrap();
/// let db = Db::open_with(dir.path().join("db"), DbOptions { durable_feed: true, ..DbOptions::default() })?;
/// assert!(db.consumer(&"c".repeat(CONSUMER_NAME_LEN_MAX)).is_ok());
/// assert!(db.consumer(&"c".repeat(CONSUMER_NAME_LEN_MAX + 1)).is_err());
/// # Ok::<(), tessera::Error>(())
/// ```
pub const CONSUMER_NAME_LEN_MAX: usize = 128;

/// How much of the feed is kept: at most [`commits_max`](Self::commits_max) commits, in at
/// most [`bytes_max`](Self::bytes_max) bytes of pages. A commit that takes the feed past
/// either cap removes the oldest entries, whether or not every consumer has read them; such a
/// consumer's next read is [`Error::FeedCursorExpired`], never a silent gap, and
/// [`Db::feed_extent`] shows any reader how close the oldest kept commit is to its cursor.
/// Commits every registered consumer has acknowledged are removed at once. The newest commit
/// is always kept, even when its entry alone is larger than `bytes_max`.
///
/// ```
/// let retention = tessera::store::FeedRetention::default();
/// assert_eq!(retention.commits_max, 100_000);
/// assert_eq!(retention.bytes_max, 1 << 30);
/// let small = tessera::store::FeedRetention { bytes_max: 16 << 20, ..retention };
/// assert_eq!(small.commits_max, 100_000);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeedRetention {
    /// Most commits kept (at least 1).
    pub commits_max: u64,
    /// Most bytes the feed's keyspaces may hold, counted in LMDB pages (the entries, their
    /// B-tree, and the old values kept for cross-process notification), so that the feed
    /// cannot fill the map however large the commits are. At least one page: below that, only
    /// the newest commit is kept.
    pub bytes_max: u64,
}

impl Default for FeedRetention {
    fn default() -> Self {
        FeedRetention { commits_max: 100_000, bytes_max: 1 << 30 }
    }
}

/// Whether a keyspace's changes go into the feed: not the feed's own, not the store's
/// `tessera.meta`, and not index entries (derived from records, rebuilt by a consumer that
/// needs them).
fn recorded(keyspace: &str) -> bool {
    keyspace != META_KEYSPACE && !keyspace.starts_with("tessera.feed") && !keyspace.starts_with("tessera.idx.")
}

/// The feed's state in one process.
pub(crate) struct FeedState {
    /// The file has the feed on (read at open, or seen in `tessera.meta` by a write).
    pub(crate) enabled: AtomicBool,
    /// The sequence through which this process knows that the file has the feed off
    /// ([`OFF_THROUGH_UNKNOWN`]: none): the last commit before a write that looked for the mark
    /// and found none, advanced by each of this process's commits that changed something and
    /// did not write the mark (a commit that changed nothing has no sequence of its own: the
    /// next commit, perhaps another process's, takes it). A write whose transaction comes right
    /// after it needs no look (see [`enabled_for_write`]).
    off_through: AtomicU64,
    pub(crate) retention: FeedRetention,
    /// `tessera.meta`, for the check each write makes while the feed is off.
    meta: OnceLock<Keyspace>,
    /// `tessera.feed`, once this process has it open.
    feed: OnceLock<Keyspace>,
    /// `tessera.feed.old`, when the file had cross-process notification on at open: this
    /// process's commits record their old values there too.
    pub(crate) olds: OnceLock<Keyspace>,
    /// The side file that wakes the other processes, for a process that found the file's
    /// notification mark after it opened the file (it has no watcher of its own).
    late_signal: OnceLock<super::wake::Signal>,
}

/// What a write transaction appends to: the feed's keyspaces as the file has them when the
/// transaction begins (see [`enabled_for_write`]).
pub(crate) struct FeedWrite {
    pub(crate) feed: Keyspace,
    pub(crate) meta: Keyspace,
    /// `tessera.feed.old`, when the file has cross-process notification on.
    pub(crate) olds: Option<Keyspace>,
    /// The file turned notification on after this process opened it: after the commit, wake
    /// the other processes through [`FeedState::late_signal`].
    pub(crate) late_notify: bool,
}

impl FeedState {
    pub(crate) fn new(retention: FeedRetention) -> Self {
        FeedState {
            enabled: AtomicBool::new(false),
            off_through: AtomicU64::new(OFF_THROUGH_UNKNOWN),
            retention: FeedRetention { commits_max: retention.commits_max.max(1), bytes_max: retention.bytes_max },
            meta: OnceLock::new(),
            feed: OnceLock::new(),
            olds: OnceLock::new(),
            late_signal: OnceLock::new(),
        }
    }

    pub(crate) fn is_enabled(&self) -> bool {
        self.enabled.load(Ordering::Acquire)
    }

    /// After this process's commit `sequence`, which changed something (so the sequence is
    /// its own) and wrote no feed mark: if the file had the feed off through the commit before
    /// it, it still has it off through this one. Called with the writer lock held.
    pub(crate) fn committed_without_mark(&self, sequence: u64) {
        let before = sequence.wrapping_sub(1);
        let _ = self.off_through.compare_exchange(before, sequence, Ordering::AcqRel, Ordering::Acquire);
    }
}

/// [`FeedState::off_through`] when this process knows nothing yet.
const OFF_THROUGH_UNKNOWN: u64 = u64::MAX;

// ------------------------------------------------------------------------------ encoding

/// In an entry of `tessera.feed.old`: the length of an insert's absent old value.
const NO_OLD_VALUE: u32 = u32::MAX;

/// One commit's old values, for the changes of its feed entry in their order: `count:u32`,
/// then per change `value_len:u32 · value` (little-endian; an insert's absent old value has
/// `value_len` `u32::MAX` and no value).
fn encode_olds<'a>(changes: impl Iterator<Item = ChangeView<'a>>, count: usize, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&(count as u32).to_le_bytes());
    for change in changes {
        match change.old {
            Some(value) => {
                out.extend_from_slice(&(value.len() as u32).to_le_bytes());
                out.extend_from_slice(value);
            }
            None => out.extend_from_slice(&NO_OLD_VALUE.to_le_bytes()),
        }
    }
}

/// Fills `batch`'s old values from its entry in `tessera.feed.old`.
fn decode_olds(batch: &mut ChangeBatch, bytes: &[u8]) -> Result<()> {
    let mut fields = Fields { bytes, keyspace: OLDS_KEYSPACE, sequence: batch.sequence };
    let count = fields.u32("old value count")? as usize;
    if count != batch.changes.len() {
        return Err(Error::Corrupted(format!(
            "keyspace {OLDS_KEYSPACE}: commit {} has {count} old values for {} changes",
            batch.sequence,
            batch.changes.len()
        )));
    }
    for change in &mut batch.changes {
        change.old = match fields.u32("old value length")? {
            NO_OLD_VALUE => None,
            len => Some(Box::from(fields.take(len as usize, "old value")?)),
        };
        if (change.kind == ChangeKind::Insert) != change.old.is_none() {
            return Err(Error::Corrupted(format!(
                "keyspace {OLDS_KEYSPACE}: commit {}: an insert with an old value, or an update or delete without one",
                batch.sequence
            )));
        }
    }
    if !fields.bytes.is_empty() {
        return Err(Error::Corrupted(format!("keyspace {OLDS_KEYSPACE}: commit {}: bytes after the last old value", batch.sequence)));
    }
    Ok(())
}

fn sequence_of(key: &[u8]) -> Result<u64> {
    let bytes: [u8; 8] = key.try_into().map_err(|_| Error::Corrupted(format!("keyspace {FEED_KEYSPACE}: a key of {} bytes", key.len())))?;
    Ok(u64::from_be_bytes(bytes))
}

fn u64_of(value: &[u8], what: &str) -> Result<u64> {
    let bytes: [u8; 8] = value.try_into().map_err(|_| Error::Corrupted(format!("{what}: {} bytes, not 8", value.len())))?;
    Ok(u64::from_be_bytes(bytes))
}

// ------------------------------------------------------------------------------ writing

/// In `tessera.meta`, written by a commit of a process with cross-process notification on
/// that appends nothing to the feed: the commit's sequence (8 bytes, big-endian). LMDB gives a
/// commit that writes nothing no sequence of its own (the next transaction has the same id),
/// and that process counts on each of its commits having one.
pub(crate) const META_LAST_EMPTY_KEY: &[u8] = b"cross_process_empty_commit";

/// Appends the commit `sequence`'s changes (the recorded ones) and applies the retention: in
/// the committing transaction, under the writer lock.
pub(crate) fn append(tx: &mut WriteTxn<'_>, target: &FeedWrite, sequence: u64, log: &ChangeLog) -> Result<()> {
    let (feed, meta) = (&target.feed, &target.meta);
    let recorded_changes = log.changes_of(recorded);
    let size = feed_entry::size_of_log(log, recorded);
    debug_assert!(size.agrees_with(&feed_entry::size(recorded_changes.clone())), "the totals size the entry as a pass does");
    let (count, entry_len) = (size.count, size.len);
    if count == 0 {
        if target.olds.is_some() {
            tx.put_unlogged(meta, META_LAST_EMPTY_KEY, &sequence.to_be_bytes())?;
        }
        return Ok(());
    }
    // Written straight into LMDB's page: a large commit's entry (a megabyte for 10,000
    // records) is not assembled in memory and copied again with its checksum.
    let writer = |out: &mut heed::ReservedSpace<'_>| {
        prefault(out);
        feed_entry::write(recorded_changes.clone(), size, out)
    };
    tx.put_unlogged_reserved(feed, &sequence.to_be_bytes(), entry_len, writer)?;
    if let Some(olds) = &target.olds {
        let mut entry = Vec::new();
        encode_olds(recorded_changes, count, &mut entry);
        tx.put_unlogged(olds, &sequence.to_be_bytes(), &entry)?;
        // A writer without cross-process notification trims the feed and leaves the old
        // values of the commits it removed: take them away here.
        let trimmed = trimmed_through(tx, meta)?;
        let mut orphans = Vec::new();
        for entry in tx.range(olds, ..=&trimmed.to_be_bytes()[..])? {
            orphans.push(sequence_of(entry?.0)?);
        }
        for orphan in orphans {
            tx.delete_unlogged(olds, &orphan.to_be_bytes())?;
        }
    }
    let retention = tx.inner().feed_state.retention;
    let entries = tx.size(feed)?.entries;
    if entries > retention.commits_max {
        let mut oldest = Vec::new();
        for entry in tx.range(feed, ..)?.take((entries - retention.commits_max) as usize) {
            oldest.push(sequence_of(entry?.0)?);
        }
        trim_through(tx, target, &oldest)?;
    }
    trim_to_bytes(tx, target, retention.bytes_max)
}

/// The bytes of pages the feed's keyspaces hold, as `tx` sees them.
fn feed_bytes(tx: &WriteTxn<'_>, target: &FeedWrite) -> Result<u64> {
    let olds = match &target.olds {
        Some(olds) => tx.size(olds)?.bytes,
        None => 0,
    };
    Ok(tx.size(&target.feed)?.bytes + olds)
}

/// Removes the oldest entries while the feed's keyspaces hold more than `bytes_max` bytes of
/// pages, keeping at least the newest entry. Each round removes the oldest commits whose
/// entries, with their old values in `tessera.feed.old`, add up to the excess (a page holds at
/// least its values, so the round never removes more than needed by much), then counts the
/// pages again. The old values count as the pages do: a delete of a large value has a small
/// entry and a large old value, and counting the entries alone removed every commit but the
/// newest each time one such commit passed the cap.
fn trim_to_bytes(tx: &mut WriteTxn<'_>, target: &FeedWrite, bytes_max: u64) -> Result<()> {
    loop {
        let bytes = feed_bytes(tx, target)?;
        if bytes <= bytes_max {
            return Ok(());
        }
        let excess = bytes - bytes_max;
        let entries = tx.size(&target.feed)?.entries;
        let mut oldest = Vec::new();
        let mut freed = 0u64;
        for entry in tx.range(&target.feed, ..)?.take(entries.saturating_sub(1) as usize) {
            let (key, value) = entry?;
            oldest.push(sequence_of(key)?);
            freed += (key.len() + value.len()) as u64;
            if let Some(olds) = &target.olds
                && let Some(old) = tx.get(olds, key)?
            {
                freed += (key.len() + old.len()) as u64;
            }
            if freed >= excess {
                break;
            }
        }
        if oldest.is_empty() {
            // Only the newest entry is left: it is kept, whatever its size.
            return Ok(());
        }
        trim_through(tx, target, &oldest)?;
    }
}

/// Smallest entry whose reserved space [`prefault`] maps ahead: below it, the system call
/// costs more than the page faults it saves.
const PREFAULT_BYTES_MIN: usize = 64 * 1024;

/// Asks the kernel to map a large entry's reserved space writable in one call
/// (`MADV_POPULATE_WRITE`) before the entry is written into it. The space is fresh pages of
/// the memory map, each of which would otherwise fault on its first write: for a commit of
/// 10,000 records, faulting a page at a time cost about a third of the insert (measured with
/// `feed_parts`). Only a hint: the contents do not change, and an error (an older kernel) is
/// ignored, the writes then fault as before.
fn prefault(space: &mut heed::ReservedSpace<'_>) {
    let region = space.as_uninit_mut();
    if region.len() < PREFAULT_BYTES_MIN {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        let page_bytes = page_bytes();
        let start = region.as_mut_ptr() as usize;
        let aligned_start = start - start % page_bytes;
        let len = start + region.len() - aligned_start;
        // SAFETY: the range covers `region`, which LMDB reserved for this value (in its
        // memory map, or in its own buffer without WRITE_MAP), widened to whole pages, each of
        // which is mapped since it holds part of `region`. MADV_POPULATE_WRITE only faults
        // the pages in writable; it never changes their contents or the mapping.
        let _ = unsafe { libc::madvise(aligned_start as *mut libc::c_void, len, libc::MADV_POPULATE_WRITE) };
    }
}

/// The system's page size, in bytes.
#[cfg(target_os = "linux")]
fn page_bytes() -> usize {
    static PAGE_BYTES: OnceLock<usize> = OnceLock::new();
    // SAFETY: sysconf reads a constant of the system; no memory is involved.
    *PAGE_BYTES
        .get_or_init(|| usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).ok().filter(|&bytes| bytes > 0).unwrap_or(4096))
}

/// Removes the feed entries `sequences` (the oldest ones, in order) and records the last as
/// trimmed in `tessera.meta`.
fn trim_through(tx: &mut WriteTxn<'_>, target: &FeedWrite, sequences: &[u64]) -> Result<()> {
    let Some(&last) = sequences.last() else { return Ok(()) };
    let (feed, meta) = (&target.feed, &target.meta);
    for sequence in sequences {
        tx.delete_unlogged(feed, &sequence.to_be_bytes())?;
        if let Some(olds) = &target.olds {
            tx.delete_unlogged(olds, &sequence.to_be_bytes())?;
        }
    }
    let trimmed = trimmed_through(tx, meta)?;
    tx.put_unlogged(meta, META_FEED_KEY, &trimmed.max(last).to_be_bytes())
}

// ------------------------------------------------------------------------------ opening

/// At open: turns the feed on if the options ask (a read-write handle), then reads whether
/// the file has it on, and opens its keyspaces if so.
pub(crate) fn open(db: &Db) -> Result<()> {
    let state = &db.inner.feed_state;
    if db.inner.options.read_only {
        state.enabled.store(marked(db)?, Ordering::Release);
        return Ok(());
    }
    let meta = db.internal_keyspace(META_KEYSPACE)?;
    let _ = state.meta.set(meta.clone());
    let on = marked(db)?;
    if on || db.inner.options.durable_feed {
        // The keyspaces first, each in a committed transaction of its own, so that the handles
        // every writer uses exist before the mark that makes writers use them.
        let feed = db.internal_keyspace(FEED_KEYSPACE)?;
        db.internal_keyspace(CONSUMERS_KEYSPACE)?;
        if !on {
            db.write(|tx| {
                if tx.get(&meta, META_FEED_KEY)?.is_none() {
                    tx.put_unlogged(&meta, META_FEED_KEY, &0u64.to_be_bytes())?;
                }
                Ok(())
            })?;
        }
        let _ = state.feed.set(feed);
        state.enabled.store(true, Ordering::Release);
    }
    let notify_on = db.read(|tx| Ok(tx.get(&meta, META_NOTIFY_KEY)?.is_some()))?;
    if db.inner.options.cross_process_notify && !state.is_enabled() {
        return Err(Error::FeedDisabled { path: db.inner.path.clone() });
    }
    if notify_on || db.inner.options.cross_process_notify {
        // Before this process's first commit that records old values, and before the mark
        // that makes other writers record them.
        let _ = state.olds.set(db.internal_keyspace(OLDS_KEYSPACE)?);
        if !notify_on {
            db.write(|tx| tx.put_unlogged(&meta, META_NOTIFY_KEY, &[]))?;
        }
    }
    Ok(())
}

/// Whether the file has the durable feed on, as a fresh snapshot sees it.
pub(crate) fn marked(db: &Db) -> Result<bool> {
    let meta = db.internal_keyspace(META_KEYSPACE)?;
    db.read(|tx| Ok(tx.get(&meta, META_FEED_KEY)?.is_some()))
}

/// Whether this process has cross-process notification on: the file had it at open, or this
/// opener turned it on (see the module docs).
pub(crate) fn notify_at_open(db: &Db) -> bool {
    db.inner.feed_state.olds.get().is_some()
}

/// For a write transaction that has just begun: the feed's and the meta keyspace if the file
/// has the feed on. A process that opened the file before another turned the feed on finds the
/// mark here, at its next write, and from then on appends too.
pub(crate) fn enabled_for_write(inner: &super::Inner, txn: &heed::RwTxn<'_>) -> Result<Option<FeedWrite>> {
    let state = &inner.feed_state;
    let Some(meta) = state.meta.get() else { return Ok(None) }; // the file is being created
    let ceiling = inner.options.map_size_max_bytes;
    if !state.is_enabled() {
        // LMDB numbers write transactions one after another across processes: when the commit
        // before this transaction is one through which the feed is known to be off, no other
        // process has committed since, and the look (a B-tree search of `tessera.meta`, a
        // tenth of a one-field write) is skipped.
        let before = (txn.id() as u64).wrapping_sub(1);
        if state.off_through.load(Ordering::Acquire) == before {
            return Ok(None);
        }
        let mark = meta.handle(inner)?.get(txn, META_FEED_KEY).map_err(|e| Error::from_heed(e, ceiling))?;
        if mark.is_none() {
            state.off_through.store(before, Ordering::Release);
            return Ok(None);
        }
        state.enabled.store(true, Ordering::Release);
    }
    let feed = match state.feed.get() {
        Some(feed) => feed.clone(),
        // Made by the other process before its mark: open it in this transaction (the handle
        // is this transaction's until it commits).
        None => opened_in(inner, txn, FEED_KEYSPACE)?,
    };
    let (olds, late_notify) = match state.olds.get() {
        Some(olds) => (Some(olds.clone()), false),
        // Another process may have turned notification on since this one opened the file.
        None => match meta.handle(inner)?.get(txn, META_NOTIFY_KEY).map_err(|e| Error::from_heed(e, ceiling))? {
            Some(_) => (Some(opened_in(inner, txn, OLDS_KEYSPACE)?), true),
            None => (None, false),
        },
    };
    Ok(Some(FeedWrite { feed, meta: meta.clone(), olds, late_notify }))
}

/// A feed keyspace another process made, opened in the write transaction `txn`.
fn opened_in(inner: &super::Inner, txn: &heed::RwTxn<'_>, name: &str) -> Result<Keyspace> {
    let ceiling = inner.options.map_size_max_bytes;
    match inner.env.open_database::<heed::types::Bytes, heed::types::Bytes>(txn, Some(name)) {
        Ok(Some(handle)) => Ok(Keyspace::new(inner, name.into(), handle)),
        Ok(None) => Err(Error::Corrupted(format!("the durable feed is on but the file has no keyspace {name}"))),
        Err(error) => Err(Error::from_heed(error, ceiling)),
    }
}

/// After a commit made with [`FeedWrite::late_notify`]: wakes the other processes, as their
/// watchers expect of every writer once the file has notification on. Best effort, like
/// their own wake-ups: a watcher looks anyway every 100 ms.
pub(crate) fn wake_others_late(inner: &super::Inner, sequence: u64) {
    let state = &inner.feed_state;
    if state.late_signal.get().is_none()
        && let Ok(signal) = super::wake::Signal::open(&super::wake::notify_path_of(&inner.path))
    {
        let _ = state.late_signal.set(signal);
    }
    if let Some(signal) = state.late_signal.get() {
        let _ = signal.raise(sequence);
    }
}

// ------------------------------------------------------------------------------ reading

/// The feed's keyspaces, if the file has the feed on.
fn keyspaces(db: &Db) -> Result<(Keyspace, Keyspace)> {
    if !db.inner.feed_state.is_enabled() {
        // Another process may have turned it on since this one opened the file.
        if !marked(db)? {
            return Err(Error::FeedDisabled { path: db.inner.path.clone() });
        }
        db.inner.feed_state.enabled.store(true, Ordering::Release);
    }
    Ok((db.internal_keyspace(FEED_KEYSPACE)?, db.internal_keyspace(META_KEYSPACE)?))
}

/// The highest sequence retention removed, in either kind of transaction.
fn trimmed_through(tx: &impl Snapshot, meta: &Keyspace) -> Result<u64> {
    match tx.get_value(meta, META_FEED_KEY)? {
        Some(value) => u64_of(value, "tessera.meta durable_feed"),
        None => Ok(0),
    }
}

/// Up to `batches_max` commits after `after` and up to `through`, in commit order, with their
/// old values (from `tessera.feed.old`): what cross-process notification delivers of other
/// processes' commits. [`Error::CrossProcessGap`] if retention removed commits after `after`,
/// or one of them has no old values (its writer did not have the option on).
pub(crate) fn read_with_olds(
    tx: &impl Snapshot,
    state: &FeedState,
    after: u64,
    through: u64,
    batches_max: usize,
) -> Result<Vec<ChangeBatch>> {
    let (Some(feed), Some(olds), Some(meta)) = (state.feed.get(), state.olds.get(), state.meta.get()) else {
        return Err(Error::CrossProcessGap { after, reason: "this process does not have the durable feed open".into() });
    };
    let trimmed = trimmed_through(tx, meta)?;
    if after < trimmed {
        return Err(Error::CrossProcessGap { after, reason: format!("retention removed the commits up to {trimmed}") });
    }
    let start = after.saturating_add(1).to_be_bytes();
    let end = through.to_be_bytes();
    let mut batches = Vec::new();
    for entry in tx.entries(feed, Bound::Included(&start[..]), Bound::Included(&end[..]))?.take(batches_max) {
        let (key, value) = entry?;
        let mut batch = decode(sequence_of(key)?, value)?;
        match tx.get_value(olds, key)? {
            Some(bytes) => decode_olds(&mut batch, bytes)?,
            None => {
                return Err(Error::CrossProcessGap {
                    after,
                    reason: format!("commit {} was made without cross-process notification, so its old values are unknown", batch.sequence),
                });
            }
        }
        batches.push(batch);
    }
    Ok(batches)
}

/// Up to `batches_max` commits after `cursor` (0: from the oldest kept), in commit order.
fn read_since(tx: &ReadTxn<'_>, feed: &Keyspace, meta: &Keyspace, cursor: u64, batches_max: usize) -> Result<Vec<ChangeBatch>> {
    if cursor > tx.sequence() {
        return Err(Error::FeedCursorAhead { cursor, newest: tx.sequence() });
    }
    let trimmed = trimmed_through(tx, meta)?;
    if cursor != 0 && cursor < trimmed {
        return Err(Error::FeedCursorExpired { cursor, oldest_kept: trimmed + 1 });
    }
    let start = cursor.saturating_add(1).to_be_bytes();
    let mut batches = Vec::new();
    for entry in tx.range(feed, &start[..]..)?.take(batches_max) {
        let (key, value) = entry?;
        batches.push(decode(sequence_of(key)?, value)?);
    }
    Ok(batches)
}

impl Db {
    /// Up to `batches_max` commits after `cursor` (a commit sequence; 0 for the oldest kept),
    /// from the durable feed, in commit order: each commit's changes to records, documents,
    /// dictionaries and the application's keyspaces, with the new values (`Change::old` is
    /// `None`; index entries are not in the feed). Read from one snapshot.
    ///
    /// [`Error::FeedDisabled`] if the file does not have the feed on;
    /// [`Error::FeedCursorExpired`] if retention removed commits after `cursor`: resynchronise
    /// from a snapshot; [`Error::FeedCursorAhead`] if `cursor` is past the newest commit.
    ///
    /// ```
    /// use tessera::{Db, DbOptions};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open_with(dir.path().join("db"), DbOptions { durable_feed: true, ..DbOptions::default() })?;
    /// let notes = db.keyspace("notes")?;
    /// db.write(|tx| tx.put(&notes, b"k", b"v"))?;
    /// let batches = db.changes_since(0, 100)?;
    /// assert_eq!(batches.len(), 1);
    /// assert_eq!((&*batches[0].changes[0].key, batches[0].changes[0].new.as_deref()), (&b"k"[..], Some(&b"v"[..])));
    /// assert!(db.changes_since(batches[0].sequence, 100)?.is_empty());
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn changes_since(&self, cursor: u64, batches_max: usize) -> Result<Vec<ChangeBatch>> {
        let (feed, meta) = keyspaces(self)?;
        self.read(|tx| read_since(tx, &feed, &meta, cursor, batches_max))
    }

    /// The newest commit at or before `sequence` that has an entry in the durable feed, and a
    /// 64-bit digest of that entry (XXH3-64 of its bytes, seeded with its sequence); `None` if
    /// the feed holds none there (retention removed them, or no commit so far recorded a
    /// change). [`Error::FeedDisabled`] if the file does not have the feed.
    ///
    /// A sequence alone does not name a commit across a file's lives: a file put back from an
    /// older copy, or one that lost its last commits to a crash under
    /// [`crate::Durability::Buffered`], numbers its next commits as the lost ones were. A
    /// consumer that keeps its cursor outside the file keeps this digest of its cursor too,
    /// and compares it when it resumes: another digest means that the commits it followed are
    /// not this file's, and reading on from the cursor would skip the file's own.
    ///
    /// ```
    /// use tessera::{Db, DbOptions};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open_with(dir.path().join("db"), DbOptions { durable_feed: true, ..DbOptions::default() })?;
    /// let notes = db.keyspace("notes")?;
    /// assert_eq!(db.feed_digest_through(u64::MAX)?, None, "no change recorded yet");
    /// db.write(|tx| tx.put(&notes, b"k", b"v"))?;
    /// let last = db.changes_since(0, 100)?.last().unwrap().sequence;
    /// let (at, digest) = db.feed_digest_through(last + 10)?.expect("the commit has an entry");
    /// assert_eq!(at, last, "the newest entry at or before the sequence asked for");
    /// assert_eq!(db.feed_digest_through(last)?, Some((last, digest)), "the same entry, the same digest");
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn feed_digest_through(&self, sequence: u64) -> Result<Option<(u64, u64)>> {
        let (feed, _) = keyspaces(self)?;
        let through = sequence.to_be_bytes();
        self.read(|tx| {
            let Some(entry) = tx.entries_rev(&feed, Bound::Unbounded, Bound::Included(&through[..]))?.next() else { return Ok(None) };
            let (key, value) = entry?;
            let at = sequence_of(key)?;
            Ok(Some((at, xxhash_rust::xxh3::xxh3_64_with_seed(value, at))))
        })
    }

    /// What the durable feed holds now, from one snapshot: its oldest and newest commits,
    /// how far retention has removed, and its size against [`FeedRetention`]'s caps. A
    /// consumer whose cursor nears [`FeedExtent::removed_through`] is about to expire (see
    /// [`Error::FeedCursorExpired`]). [`Error::FeedDisabled`] if the file does not have the
    /// feed.
    ///
    /// ```
    /// use tessera::{Db, DbOptions, FeedRetention};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let retention = FeedRetention { commits_max: 2, ..FeedRetention::default() };
    /// let db = Db::open_with(dir.path().join("db"), DbOptions { durable_feed: true, feed_retention: retention, ..DbOptions::default() })?;
    /// let notes = db.keyspace("notes")?;
    /// for n in 0..3u8 {
    ///     db.write(|tx| tx.put(&notes, &[n], b"v"))?;
    /// }
    /// let extent = db.feed_extent()?;
    /// assert_eq!(extent.commits, 2, "the oldest of the three was removed");
    /// assert_eq!(extent.oldest_kept, Some(extent.removed_through + 1));
    /// assert!(extent.bytes > 0 && extent.bytes <= retention.bytes_max);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn feed_extent(&self) -> Result<FeedExtent> {
        let (feed, meta) = keyspaces(self)?;
        // The old values count as the writers' cap counts them, in every process: also in one
        // that opened the file before another turned notification on, and in a read-only one,
        // neither of which opened them at open. The mark, once written, stays.
        let olds = match self.inner.feed_state.olds.get() {
            Some(olds) => Some(olds.clone()),
            None if self.read(|tx| Ok(tx.get(&meta, META_NOTIFY_KEY)?.is_some()))? => match self.inner.options.read_only {
                // As the file had them when this handle opened it (see `open_keyspaces_read_only`).
                true => self.existing_keyspace_committed(OLDS_KEYSPACE)?,
                false => Some(self.internal_keyspace(OLDS_KEYSPACE)?),
            },
            None => None,
        };
        self.read(|tx| {
            let size = tx.size(&feed)?;
            let olds_bytes = match &olds {
                Some(olds) => tx.size(olds)?.bytes,
                None => 0,
            };
            let oldest_kept = match tx.range(&feed, ..)?.next() {
                Some(entry) => Some(sequence_of(entry?.0)?),
                None => None,
            };
            Ok(FeedExtent {
                newest: tx.sequence(),
                oldest_kept,
                removed_through: trimmed_through(tx, &meta)?,
                commits: size.entries,
                bytes: size.bytes + olds_bytes,
            })
        })
    }

    /// The feed consumer `name` (1 to [`CONSUMER_NAME_LEN_MAX`] bytes), registered if new with
    /// its cursor at the newest commit: it reads what is committed from now on. Its cursor is
    /// kept in the file; commits every consumer has acknowledged are removed.
    ///
    /// ```
    /// use tessera::{Db, DbOptions};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open_with(dir.path().join("db"), DbOptions { durable_feed: true, ..DbOptions::default() })?;
    /// let notes = db.keyspace("notes")?;
    /// let replica = db.consumer("replica")?;
    /// db.write(|tx| tx.put(&notes, b"k", b"v"))?;
    /// let batches = replica.changes(100)?;
    /// assert_eq!(batches.len(), 1);
    /// replica.ack(batches[0].sequence)?;
    /// assert!(replica.changes(100)?.is_empty());
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn consumer(&self, name: &str) -> Result<Consumer> {
        super::names::check("feed consumer", name, CONSUMER_NAME_LEN_MAX)?;
        let (_, meta) = keyspaces(self)?;
        let consumers = self.internal_keyspace(CONSUMERS_KEYSPACE)?;
        let present = self.read(|tx| Ok(tx.get(&consumers, name.as_bytes())?.is_some()))?;
        if !present {
            self.write(|tx| {
                if tx.get(&consumers, name.as_bytes())?.is_none() {
                    // Every commit before this one is done; this transaction's own sequence
                    // is one past the newest.
                    let newest = tx.sequence().saturating_sub(1).max(trimmed_through(tx, &meta)?);
                    tx.put_unlogged(&consumers, name.as_bytes(), &newest.to_be_bytes())?;
                }
                Ok(())
            })?;
        }
        Ok(Consumer { db: self.clone(), name: name.into(), consumers })
    }
}

impl Db {
    /// Every registered feed consumer ([`Db::consumer`]), in name order: what keeps commits in
    /// the feed. [`Error::FeedDisabled`] if the file does not have the feed.
    ///
    /// ```
    /// use tessera::{Db, DbOptions};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open_with(dir.path().join("db"), DbOptions { durable_feed: true, ..DbOptions::default() })?;
    /// db.consumer("search-index")?;
    /// db.consumer("replica")?;
    /// let names: Vec<String> = db.consumers()?.iter().map(|c| c.name().to_owned()).collect();
    /// assert_eq!(names, ["replica", "search-index"]);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn consumers(&self) -> Result<Vec<Consumer>> {
        keyspaces(self)?;
        let consumers = match self.inner.options.read_only {
            // As the file had it when this handle opened it (see `open_keyspaces_read_only`).
            true => match self.existing_keyspace_committed(CONSUMERS_KEYSPACE)? {
                Some(consumers) => consumers,
                None => return Ok(Vec::new()),
            },
            false => self.internal_keyspace(CONSUMERS_KEYSPACE)?,
        };
        let names = self.read(|tx| {
            let mut names = Vec::new();
            for entry in tx.range(&consumers, ..)? {
                let name = std::str::from_utf8(entry?.0)
                    .map_err(|_| Error::Corrupted(format!("{CONSUMERS_KEYSPACE}: a feed consumer's name is not UTF-8")))?;
                names.push(Box::<str>::from(name));
            }
            Ok(names)
        })?;
        Ok(names.into_iter().map(|name| Consumer { db: self.clone(), name, consumers: consumers.clone() }).collect())
    }
}

/// What the durable feed holds at one snapshot ([`Db::feed_extent`]).
///
/// ```
/// use tessera::{Db, DbOptions};
/// # let dir = tempfile::tempdir().unwrap();
/// let db = Db::open_with(dir.path().join("db"), DbOptions { durable_feed: true, ..DbOptions::default() })?;
/// let extent = db.feed_extent()?;
/// assert_eq!((extent.commits, extent.oldest_kept, extent.removed_through), (0, None, 0));
/// # Ok::<(), tessera::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeedExtent {
    /// The newest commit of the file (a consumer that has read everything has this cursor).
    pub newest: u64,
    /// The oldest commit the feed holds; `None` when it holds none.
    pub oldest_kept: Option<u64>,
    /// The highest sequence removed from the feed, by retention or because every consumer
    /// had acknowledged it (0: none). A cursor below it, other than 0, is expired.
    pub removed_through: u64,
    /// How many commits the feed holds (only commits that changed a recorded keyspace have an
    /// entry).
    pub commits: u64,
    /// The bytes of pages the feed's keyspaces hold (`tessera.feed`, and `tessera.feed.old`
    /// when the file has cross-process notification on), which [`FeedRetention::bytes_max`]
    /// caps: the figure the writers' cap counts, in any process.
    pub bytes: u64,
}

/// A named reader of the durable feed ([`Db::consumer`]), whose cursor is kept in the file.
///
/// ```
/// # use tessera::{Db, DbOptions};
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = Db::open_with(dir.path().join("db"), DbOptions { durable_feed: true, ..DbOptions::default() })?;
/// let consumer = db.consumer("search-index")?;
/// assert_eq!(consumer.name(), "search-index");
/// # Ok::<(), tessera::Error>(())
/// ```
#[derive(Clone)]
pub struct Consumer {
    db: Db,
    name: Box<str>,
    consumers: Keyspace,
}

impl std::fmt::Debug for Consumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Consumer({:?})", self.name)
    }
}

impl Consumer {
    /// The consumer's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The last sequence this consumer acknowledged.
    pub fn cursor(&self) -> Result<u64> {
        let name = self.name.as_bytes();
        self.db.read(|tx| match tx.get(&self.consumers, name)? {
            Some(value) => u64_of(value, "a feed consumer's cursor"),
            None => Err(Error::NoSuchConsumer { name: self.name.to_string() }),
        })
    }

    /// Up to `batches_max` commits after the cursor, in commit order;
    /// [`Error::FeedCursorExpired`] if retention removed some the consumer had not
    /// acknowledged.
    pub fn changes(&self, batches_max: usize) -> Result<Vec<ChangeBatch>> {
        let (feed, meta) = keyspaces(&self.db)?;
        let name = self.name.as_bytes();
        self.db.read(|tx| {
            let cursor = match tx.get(&self.consumers, name)? {
                Some(value) => u64_of(value, "a feed consumer's cursor")?,
                None => return Err(Error::NoSuchConsumer { name: self.name.to_string() }),
            };
            read_since(tx, &feed, &meta, cursor, batches_max)
        })
    }

    /// Records that the consumer has handled every commit up to `cursor` (a cursor never goes
    /// back: an older one is ignored), and removes the commits every consumer has handled.
    /// [`Error::FeedCursorAhead`] if `cursor` is past the newest commit: the consumer would
    /// never read the commits made up to it.
    pub fn ack(&self, cursor: u64) -> Result<()> {
        let (feed, meta) = keyspaces(&self.db)?;
        let name = self.name.as_bytes();
        self.db.write(|tx| {
            let current = match tx.get(&self.consumers, name)? {
                Some(value) => u64_of(value, "a feed consumer's cursor")?,
                None => return Err(Error::NoSuchConsumer { name: self.name.to_string() }),
            };
            if cursor <= current {
                return Ok(());
            }
            // This transaction's own sequence is one past the newest commit.
            let newest = tx.sequence().saturating_sub(1);
            if cursor > newest {
                return Err(Error::FeedCursorAhead { cursor, newest });
            }
            tx.put_unlogged(&self.consumers, name, &cursor.to_be_bytes())?;
            self.remove_handled(tx, &feed, &meta)
        })
    }

    /// Unregisters the consumer, and removes the commits every remaining consumer has
    /// handled: commits are no longer kept for it (with no consumer left, the feed keeps
    /// commits up to its retention limits, as before the first consumer).
    ///
    /// ```
    /// use tessera::{Db, DbOptions};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open_with(dir.path().join("db"), DbOptions { durable_feed: true, ..DbOptions::default() })?;
    /// let notes = db.keyspace("notes")?;
    /// let (laggard, current) = (db.consumer("laggard")?, db.consumer("current")?);
    /// db.write(|tx| tx.put(&notes, b"k", b"v"))?;
    /// # assert_eq!(db.feed_extent()?.commits, 1);
    /// current.ack(db.feed_extent()?.newest)?;
    /// assert_eq!(db.feed_extent()?.commits, 1, "kept for the laggard");
    /// laggard.remove()?;
    /// assert_eq!(db.feed_extent()?.commits, 0);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn remove(self) -> Result<()> {
        let (feed, meta) = keyspaces(&self.db)?;
        self.db.write(|tx| {
            tx.delete_unlogged(&self.consumers, self.name.as_bytes())?;
            self.remove_handled(tx, &feed, &meta)
        })
    }

    /// Removes from the feed the commits every registered consumer has acknowledged. With no
    /// consumer left, nothing: the feed then keeps commits as a file without consumers does,
    /// up to its retention limits, for [`Db::changes_since`].
    fn remove_handled(&self, tx: &mut crate::store::WriteTxn<'_>, feed: &Keyspace, meta: &Keyspace) -> Result<()> {
        let mut handled = None::<u64>;
        for entry in tx.range(&self.consumers, ..)? {
            let cursor = u64_of(entry?.1, "a feed consumer's cursor")?;
            handled = Some(handled.map_or(cursor, |handled| handled.min(cursor)));
        }
        let Some(handled) = handled else { return Ok(()) };
        let mut done = Vec::new();
        for entry in tx.range(feed, ..=&handled.to_be_bytes()[..])? {
            done.push(sequence_of(entry?.0)?);
        }
        // The old values too, if this process knows the file has them (a writer that finds
        // them left over removes them: see `append`).
        let olds = self.db.inner.feed_state.olds.get().cloned();
        trim_through(tx, &FeedWrite { feed: feed.clone(), meta: meta.clone(), olds, late_notify: false }, &done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::feed::Change;
    use crate::store::feed_entry::{encode, v1_encoder};

    fn change(keyspace: &str, key: &[u8], new: Option<&[u8]>) -> Change {
        let kind = if new.is_some() { ChangeKind::Update } else { ChangeKind::Delete };
        Change { keyspace: keyspace.into(), key: key.into(), kind, old: None, new: new.map(Box::from) }
    }

    #[test]
    fn old_values_decode_onto_their_entry_and_damage_is_an_error() {
        let mut changes = vec![change("a", b"k1", Some(b"v1")), change("a", b"k2", None), change("a", b"k3", Some(b"new"))];
        changes[0].old = Some(Box::from(&b"v0"[..]));
        changes[1].old = Some(Box::from(&b""[..]));
        changes[2].kind = ChangeKind::Insert;
        let refs: Vec<ChangeView<'_>> = changes.iter().map(Change::view).collect();
        let mut olds = Vec::new();
        let entry = encode(&refs);
        encode_olds(refs.iter().copied(), refs.len(), &mut olds);
        let mut batch = decode(9, &entry).unwrap();
        decode_olds(&mut batch, &olds).unwrap();
        assert_eq!(batch.changes, changes);
        // Old values go with an entry of either format.
        let mut batch = decode(9, &v1_encoder::encode(&refs)).unwrap();
        decode_olds(&mut batch, &olds).unwrap();
        assert_eq!(batch.changes, changes);
        for len in 0..olds.len() {
            let mut batch = decode(9, &entry).unwrap();
            assert!(matches!(decode_olds(&mut batch, &olds[..len]), Err(Error::Corrupted(_))), "truncated to {len}");
        }
        let mut longer = olds.clone();
        longer.push(0);
        assert!(matches!(decode_olds(&mut decode(9, &entry).unwrap(), &longer), Err(Error::Corrupted(_))));
        // Old values that contradict the kinds: an update without one.
        let mut contradicting = changes.clone();
        contradicting[0].old = None;
        let refs: Vec<ChangeView<'_>> = contradicting.iter().map(Change::view).collect();
        encode_olds(refs.iter().copied(), refs.len(), &mut olds);
        assert!(matches!(decode_olds(&mut decode(9, &entry).unwrap(), &olds), Err(Error::Corrupted(_))));
    }

    #[test]
    fn an_entry_written_into_reserved_space_reads_back_checked_and_a_wrong_length_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path().join("db")).unwrap();
        let space = db.keyspace("reserved").unwrap();
        let changes = [change("tessera.col.a", b"k1", Some(&[7; 5000])), change("notes", b"k2", None)];
        let refs: Vec<ChangeView<'_>> = changes.iter().map(Change::view).collect();
        let len = feed_entry::size(refs.iter().copied()).len;
        db.write(|tx| {
            let size = feed_entry::size(refs.iter().copied());
            tx.put_unlogged_reserved(&space, b"entry", len, |out| feed_entry::write(refs.iter().copied(), size, out))
        })
        .unwrap();
        let expected = encode(&refs);
        assert_eq!(expected.len(), len);
        // Read through the store: the checksum written after the value holds.
        assert_eq!(db.read(|tx| Ok(tx.get(&space, b"entry")?.map(<[u8]>::to_vec))).unwrap(), Some(expected));
        // A writer that writes less than it reserved fails the transaction: nothing is stored.
        let short = db.write(|tx| {
            let first = feed_entry::size(refs[..1].iter().copied());
            tx.put_unlogged_reserved(&space, b"short", len, |out| feed_entry::write(refs[..1].iter().copied(), first, out))
        });
        assert!(short.is_err());
        assert!(db.read(|tx| Ok(tx.get(&space, b"short")?.is_none())).unwrap());
    }

    /// A file written before format 2 holds format-1 entries: they read back beside the
    /// format-2 entries of later commits, through `changes_since` and a consumer.
    #[test]
    fn a_feed_with_entries_of_the_old_format_reads_them_beside_new_ones() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open_with(dir.path().join("db"), crate::DbOptions { durable_feed: true, ..crate::DbOptions::default() }).unwrap();
        let notes = db.keyspace("notes").unwrap();
        let consumer = db.consumer("replica").unwrap();
        let feed = db.internal_keyspace(FEED_KEYSPACE).unwrap();
        let old_changes = [change("notes", b"a", Some(b"1")), change("tessera.col.x", b"b", None)];
        let refs: Vec<ChangeView<'_>> = old_changes.iter().map(Change::view).collect();
        // As the old encoder wrote it, under this commit's own sequence (an unlogged write
        // appends nothing of its own).
        let old_sequence = db
            .write(|tx| {
                let sequence = tx.sequence();
                tx.put_unlogged(&feed, &sequence.to_be_bytes(), &v1_encoder::encode(&refs))?;
                Ok(sequence)
            })
            .unwrap();
        db.write(|tx| tx.put(&notes, b"c", b"3")).unwrap();
        let stored =
            db.read(|tx| tx.range(&feed, ..)?.map(|entry| entry.map(|(_, value)| value.to_vec())).collect::<Result<Vec<_>>>()).unwrap();
        assert_eq!(stored.len(), 2);
        assert_eq!(&stored[1][..5], &[0xFF, 0xFF, 0xFF, 0xFF, 2], "a new commit writes format 2");
        for batches in [db.changes_since(0, 10).unwrap(), consumer.changes(10).unwrap()] {
            assert_eq!(batches.len(), 2);
            assert_eq!((batches[0].sequence, &batches[0].changes[..]), (old_sequence, &old_changes[..]));
            let inserted =
                Change { keyspace: "notes".into(), key: b"c"[..].into(), kind: ChangeKind::Insert, old: None, new: Some(b"3"[..].into()) };
            assert_eq!(batches[1].changes, [inserted]);
        }
    }

    #[test]
    fn index_entries_and_the_feed_itself_are_not_recorded() {
        assert!(recorded("tessera.col.tasks") && recorded("notes") && recorded("tessera.dictionary.default"));
        assert!(!recorded("tessera.idx.tasks.priority") && !recorded(FEED_KEYSPACE) && !recorded(CONSUMERS_KEYSPACE));
        assert!(!recorded(OLDS_KEYSPACE));
        assert!(!recorded(META_KEYSPACE));
    }
}
