//! Which commits of the file this process made. LMDB numbers write transactions one after
//! another across every process that writes the file, so a gap between this process's last
//! commit and the next transaction it begins (or a snapshot it reads) is other processes'
//! commits. A handle made from what the file held at one commit (a collection's schema) is
//! still right at a later one when no other process committed in between, which this answers
//! with two atomics: the single-process case never reads anything to know it.

use std::sync::atomic::{AtomicU64, Ordering};

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct CommitOrigins {
    /// This process's last commit that wrote something (0 before its first).
    own_last: AtomicU64,
    /// The newest commit known that may be another process's (0 for none known).
    foreign_last: AtomicU64,
}

impl CommitOrigins {
    /// A write transaction that will commit as `sequence` begins, under the file's write lock:
    /// the commits between this process's last one and it are other processes'.
    pub(crate) fn write_begins(&self, sequence: u64) {
        let before = sequence.saturating_sub(1);
        if before > self.own_last.load(Ordering::Acquire) {
            self.foreign_last.fetch_max(before, Ordering::AcqRel);
        }
    }

    /// This process committed `sequence`, a commit that wrote something (LMDB gives a commit
    /// that writes nothing no sequence of its own).
    pub(crate) fn committed(&self, sequence: u64) {
        self.own_last.fetch_max(sequence, Ordering::AcqRel);
    }

    /// Whether a commit after `after` and up to `through` (the last commit a view includes)
    /// may be another process's. Conservative: a commit of this process that a reader sees
    /// before its writer has recorded it counts as another's.
    pub(crate) fn foreign_between(&self, after: u64, through: u64) -> bool {
        if through > self.own_last.load(Ordering::Acquire) {
            self.foreign_last.fetch_max(through, Ordering::AcqRel);
        }
        self.foreign_last.load(Ordering::Acquire) > after
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_between_own_commits_are_foreign_and_own_commits_are_not() {
        let origins = CommitOrigins::default();
        // The file had commits 1..=10 before this process: its first write is 11.
        origins.write_begins(11);
        assert!(origins.foreign_between(9, 10), "commit 10 was not this process's");
        assert!(!origins.foreign_between(10, 10));
        origins.committed(11);
        origins.write_begins(12);
        origins.committed(12);
        assert!(!origins.foreign_between(10, 12), "11 and 12 were this process's");
        // Another process commits 13 and 14; this process sees them in a snapshot.
        assert!(origins.foreign_between(12, 14));
        assert!(!origins.foreign_between(14, 14));
        // Or in its next write, without a snapshot first.
        let later = CommitOrigins::default();
        later.write_begins(1);
        later.committed(1);
        later.write_begins(4);
        assert!(later.foreign_between(1, 3), "2 and 3 were another process's");
        assert!(!later.foreign_between(3, 3));
    }
}
