//! `Db::check`: an integrity check that reads every entry tessera keeps and reports what does
//! not hold, without panicking on damage and without writing.
//!
//! It checks today: every value of every keyspace against its checksum (storage format 4),
//! that keys ascend, that a lookup of each key finds its entry (branch pages), and that as many
//! entries can be read as LMDB counts (when any of these fails, the checks below, which read
//! values, are skipped); LMDB's main tree keeps the keyspaces' names without a checksum, so
//! the names must ascend and open, every name `tessera.…` must be one tessera makes, and each
//! collection must have both its records and its index keyspace; every collection's schema
//! and shared-key table parse; every record validates as a binary document with those keys;
//! every index entry points at a record whose value gives exactly that entry, and every record
//! has its entry in every built index; every dictionary entry's key and value parse, and every
//! long key lies under the file's keyed hash of it (storage format 5); every document field's
//! key is a document id followed by a field path of non-empty names. (A document field's value is not checked: a
//! `FieldTransform` may store any bytes there.) Before all of it, LMDB's own pages are walked
//! from the file's bytes (`store::structure`), and a damaged keyspace is never handed to LMDB,
//! which trusts its pages and would crash the process on damage.

use crate::Db;
use crate::error::Result;

/// What [`Db::check`] found.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// let db = tessera::Db::open(dir.path().join("db"))?;
/// let report = db.check()?;
/// assert!(report.is_ok(), "{report}");
/// # Ok::<(), tessera::Error>(())
/// ```
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CheckReport {
    /// Keyspaces read.
    pub keyspaces: usize,
    /// Entries read.
    pub entries: u64,
    /// What does not hold, at most [`CHECK_PROBLEMS_MAX`] of them.
    pub problems: Vec<Problem>,
    /// Problems found beyond the ones listed.
    pub problems_not_listed: u64,
}

/// Most bytes of a key a [`Problem`] shows (as hex).
///
/// ```
/// use tessera::{CheckReport, PROBLEM_KEY_BYTES_MAX};
/// let report: CheckReport = Default::default();
/// assert!(report.problems.iter().all(|problem| problem.key.len() <= 2 * PROBLEM_KEY_BYTES_MAX + '…'.len_utf8()));
/// ```
pub const PROBLEM_KEY_BYTES_MAX: usize = 64;

/// Most problems a [`CheckReport`] lists.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// let db = tessera::Db::open(dir.path().join("db"))?;
/// let report = db.check()?;
/// assert!(report.problems.len() <= tessera::CHECK_PROBLEMS_MAX);
/// # Ok::<(), tessera::Error>(())
/// ```
pub const CHECK_PROBLEMS_MAX: usize = 1_000;

/// One thing [`Db::check`] found wrong: where, and what.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// let db = tessera::Db::open(dir.path().join("db"))?;
/// for problem in db.check()?.problems {
///     eprintln!("{}: key {}: {}", problem.keyspace, problem.key, problem.what);
/// }
/// # Ok::<(), tessera::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The keyspace.
    pub keyspace: String,
    /// The entry's key, as hex (empty for the keyspace as a whole), its first
    /// [`PROBLEM_KEY_BYTES_MAX`] bytes and `…` when longer.
    pub key: String,
    /// What is wrong.
    pub what: String,
}

impl CheckReport {
    /// True when nothing was found wrong.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let ks = db.keyspace("ks")?;
    /// db.write(|tx| tx.put(&ks, b"k", b"v"))?;
    /// assert!(db.check()?.is_ok());
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty() && self.problems_not_listed == 0
    }

    pub(crate) fn problem(&mut self, keyspace: &str, key: &[u8], what: impl Into<String>) {
        if self.problems.len() < CHECK_PROBLEMS_MAX {
            // Damage can make a key as long as a page: show its first bytes.
            let mut shown = crate::store::key::hex(&key[..key.len().min(PROBLEM_KEY_BYTES_MAX)]);
            if key.len() > PROBLEM_KEY_BYTES_MAX {
                shown.push('…');
            }
            let key = shown;
            self.problems.push(Problem { keyspace: keyspace.to_owned(), key, what: what.into() });
        } else {
            self.problems_not_listed += 1;
        }
    }
}

impl std::fmt::Display for CheckReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let found = self.problems.len() as u64 + self.problems_not_listed;
        writeln!(f, "{} keyspaces, {} entries checked, {found} problems", self.keyspaces, self.entries)?;
        for problem in &self.problems {
            writeln!(f, "  {} [{}]: {}", problem.keyspace, problem.key, problem.what)?;
        }
        Ok(())
    }
}

/// How many read transactions [`Db::check`] begins, looking for one whose commit is still in
/// a meta page, before it checks without the structure walk (only other writers committing
/// twice between a transaction's start and the read of the meta pages, every time, can
/// exhaust it).
const WALK_ATTEMPTS_MAX: u32 = 16;

impl Db {
    /// A read transaction and the walk of its commit's structure (`None` when no attempt
    /// found its commit in a meta page).
    fn walked_read_txn(&self) -> Result<(crate::store::ReadTxn<'_>, Option<crate::store::structure::StructureReport>)> {
        for _ in 0..WALK_ATTEMPTS_MAX {
            let txn = self.read_txn()?;
            let txn_id = txn.raw().id() as u64;
            // The transaction keeps its commit's pages from being reused while they are read.
            if let Some(structure) = crate::store::structure::verify_commit(self.path(), txn_id)? {
                return Ok((txn, Some(structure)));
            }
        }
        Ok((self.read_txn()?, None))
    }

    /// [`Db::walked_read_txn`] with every keyspace the walk lists open
    /// ([`Db::open_existing_keyspaces`]: a handle opened inside the check's read transaction
    /// could be given to a writer's new keyspace too). Opening changes no page, so a walk is
    /// kept for a transaction of the same commit.
    fn walked_read_txn_with_keyspaces(&self) -> Result<(crate::store::ReadTxn<'_>, Option<crate::store::structure::StructureReport>)> {
        let mut walked = None;
        for _ in 0..WALK_ATTEMPTS_MAX {
            let (txn, structure) = match walked.take() {
                Some((txn_id, structure)) => {
                    let txn = self.read_txn()?;
                    if txn.raw().id() as u64 == txn_id { (txn, structure) } else { self.walked_read_txn()? }
                }
                None => self.walked_read_txn()?,
            };
            let names = match &structure {
                // LMDB's own trees are damaged: nothing is read through LMDB.
                Some(structure) if structure.lmdb_trees_damaged() => return Ok((txn, Some(structure.clone()))),
                Some(structure) => structure.keyspaces.clone(),
                None => self.keyspace_names()?,
            };
            if self.unopened_keyspace(&txn, names.iter().map(String::as_str))?.is_none() {
                return Ok((txn, structure));
            }
            let txn_id = txn.raw().id() as u64;
            drop(txn);
            self.open_existing_keyspaces(names.iter().map(String::as_str))?;
            walked = Some((txn_id, structure));
        }
        Err(crate::Error::LimitExceeded { what: "checks begun while others kept creating keyspaces", limit: WALK_ATTEMPTS_MAX as u64 })
    }

    /// Reads every entry tessera keeps and reports what does not hold (see [`CheckReport`]).
    /// Damage is reported, never a panic; an error is returned only when the file cannot be
    /// read at all, or when called inside a write transaction ([`crate::Error::WouldDeadlock`]:
    /// the check may open keyspaces, which takes a write transaction of its own).
    ///
    /// It first walks LMDB's structure from the file's bytes, at the commit its read
    /// transaction sees ([`structure`](crate::store::structure)): a keyspace whose pages are
    /// damaged is reported by page and not read through LMDB (which trusts its pages and
    /// could crash the process), and damage to LMDB's main or free-page tree ends the check
    /// there.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let report = db.check()?;
    /// assert!(report.is_ok(), "{:?}", report.problems);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn check(&self) -> Result<CheckReport> {
        // It may open keyspace handles, which takes a write transaction of its own
        // (`Db::open_existing_keyspaces`): refused inside one, whichever handles are open.
        if crate::store::writing_on_this_thread() {
            return Err(crate::Error::WouldDeadlock { operation: "a check", advice: "check outside the write transaction" });
        }
        let mut report = CheckReport::default();
        // LMDB's own structure first, from the file's bytes: LMDB trusts its pages, and a
        // damaged page header or node offset would crash the process inside it. A damaged
        // keyspace is not handed to LMDB; damaged LMDB trees (the main tree names the
        // keyspaces) stop the check here.
        let (txn, structure) = self.walked_read_txn_with_keyspaces()?;
        let mut damaged = 0u64;
        let mut structurally_damaged = std::collections::BTreeSet::new();
        let names = match structure {
            Some(structure) => {
                for problem in &structure.problems {
                    report.problem(problem.tree.name(), b"", format!("page {}: {}", problem.page, problem.damage));
                    structurally_damaged.insert(problem.tree.name().to_owned());
                }
                if structure.lmdb_trees_damaged() {
                    report.keyspaces = structure.keyspaces.len();
                    let not_listed = structure.problems_not_listed;
                    let what =
                        format!("LMDB's structure is damaged ({not_listed} more problems not listed): no keyspace was read through LMDB");
                    report.problem("", b"", what);
                    return Ok(report);
                }
                damaged += structurally_damaged.len() as u64;
                structure.keyspaces
            }
            None => self.keyspace_names()?,
        };
        // The main tree's keys are the keyspaces' names: LMDB finds a keyspace by a lookup,
        // which names out of order can misdirect, and the keyspace then reads as missing.
        for pair in names.windows(2).filter(|pair| pair[0] >= pair[1]) {
            let main = crate::store::structure::Tree::Main;
            report.problem(main.name(), pair[1].as_bytes(), "keyspace names out of order: a lookup by name may not find a keyspace");
            damaged += 1;
        }
        // Every value of every keyspace, the application's included, against its checksum
        // first: the checks below read values, and would stop at the first damaged one.
        for name in names.iter().filter(|name| !structurally_damaged.contains(*name)) {
            let Some(keyspace) = self.opened_keyspace(name) else {
                // Names are read lossily: one that is not UTF-8, or holds a NUL, was never made
                // by tessera and cannot be opened (its values would go unchecked).
                if name.contains(['\0', char::REPLACEMENT_CHARACTER]) {
                    report.problem(name, b"", "the keyspace's name in LMDB's main tree is damaged (not UTF-8, or a NUL): not checked");
                }
                continue;
            };
            if !keyspace.checksummed {
                continue;
            }
            let mut found = 0u64;
            let mut previous: Option<&[u8]> = None;
            for entry in txn.stored_entries(&keyspace)? {
                let (key, stored) = entry?;
                found += 1;
                if crate::store::checksum::open(key, stored).is_none() {
                    report.problem(name, key, "the stored value fails its checksum");
                    damaged += 1;
                }
                // The walk follows page pointers; a lookup descends by the keys of the branch
                // pages. Both must agree, in ascending key order.
                if previous.is_some_and(|previous| previous >= key) {
                    report.problem(name, key, "keys out of order: a B-tree page is damaged");
                    damaged += 1;
                } else if txn.stored_get(&keyspace, key)? != Some(stored) {
                    report.problem(name, key, "a lookup does not find this entry: a branch page above it is damaged");
                    damaged += 1;
                }
                previous = Some(key);
            }
            // LMDB keeps each B-tree's entry count apart from its pages: fewer entries found
            // than counted means damage hid part of the tree (a page or a pointer to one).
            let counted = txn.len(&keyspace)?;
            if found != counted {
                report.problem(name, b"", format!("LMDB counts {counted} entries but {found} can be read: part of the B-tree is damaged"));
                damaged += 1;
            }
        }
        if damaged > 0 {
            report.keyspaces = names.len();
            report.problem(
                "",
                b"",
                format!("{damaged} values or B-trees are damaged: records, indexes, dictionaries and documents were not checked further"),
            );
            return Ok(report);
        }
        check_keyspace_names(&names, &mut report);
        for name in &names {
            if let Some(collection) = name.strip_prefix("tessera.col.") {
                report.keyspaces += 1;
                crate::collection::check(self, &txn, collection, &mut report)?;
            } else if name.starts_with("tessera.dictionary.") || name.starts_with("tessera.documents.") {
                let Some(keyspace) = self.opened_keyspace(name) else { continue };
                report.keyspaces += 1;
                if name.starts_with("tessera.dictionary.") {
                    crate::dictionary::check(self, &txn, &keyspace, &mut report)?;
                } else {
                    check_document_fields(&txn, &keyspace, &mut report)?;
                }
            }
        }
        Ok(report)
    }
}

/// tessera's own keyspaces that are not one per collection, dictionary or documents (the
/// constants they are made from: a new one must be added here, or `check` reports it).
const INTERNAL_KEYSPACES: [&str; 6] = [
    crate::store::META_KEYSPACE,
    crate::collection::SCHEMA_KEYSPACE,
    crate::collection::keys::KEYS_KEYSPACE,
    crate::store::durable_feed::FEED_KEYSPACE,
    crate::store::durable_feed::CONSUMERS_KEYSPACE,
    crate::store::durable_feed::OLDS_KEYSPACE,
];

/// Checks the names of tessera's own keyspaces (LMDB's main tree holds them without a
/// checksum): each is one tessera makes, and a collection's records and index keyspaces come
/// in pairs (both are made when it is created). A damaged name would hide a keyspace: an index
/// whose keyspace is gone reads as empty.
fn check_keyspace_names(names: &[String], report: &mut CheckReport) {
    let has = |name: String| names.contains(&name);
    for name in names.iter().filter(|name| name.starts_with("tessera.")) {
        if let Some(collection) = name.strip_prefix("tessera.col.") {
            if !has(format!("tessera.idx.{collection}")) {
                report.problem(name, b"", format!("collection {collection:?} has no index keyspace `tessera.idx.{collection}`"));
            }
        } else if let Some(collection) = name.strip_prefix("tessera.idx.") {
            if !has(format!("tessera.col.{collection}")) {
                report.problem(name, b"", format!("an index keyspace of no collection: `tessera.col.{collection}` is missing"));
            }
        } else if !INTERNAL_KEYSPACES.contains(&name.as_str())
            && !name.starts_with(crate::dictionary::DICTIONARY_KEYSPACE_PREFIX)
            && !name.starts_with(crate::documents::DOCUMENTS_KEYSPACE_PREFIX)
        {
            report.problem(name, b"", "a keyspace tessera never makes: its name in LMDB's main tree may be damaged");
        }
    }
}

/// Checks the keys of a documents keyspace: each is a document id in the order-preserving
/// encoding (`store::key`), then a field path of names separated by 0x00, none empty (see
/// `documents`, "Key layout").
fn check_document_fields(txn: &crate::store::ReadTxn<'_>, keyspace: &crate::store::Keyspace, report: &mut CheckReport) -> Result<()> {
    for entry in txn.range(keyspace, ..)? {
        let (stored, _) = entry?;
        report.entries += 1;
        match crate::store::key::decode_bytes(stored) {
            None => report.problem(keyspace.name(), stored, "field key does not start with a document id"),
            Some((_, path)) if path.is_empty() || path.split(|&byte| byte == 0).any(<[u8]>::is_empty) => {
                report.problem(keyspace.name(), stored, "field key has an empty field name")
            }
            Some(_) => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_problem_shows_the_first_bytes_of_a_long_key() {
        // A damaged node can claim a key as long as a page; the report stays readable.
        let mut report = CheckReport::default();
        report.problem("ks", &[0xAB; 3000], "damaged");
        report.problem("ks", &[0x01, 0x02], "short");
        assert_eq!(report.problems[0].key, format!("{}…", "ab".repeat(PROBLEM_KEY_BYTES_MAX)));
        assert_eq!(report.problems[1].key, "0102");
    }
}
