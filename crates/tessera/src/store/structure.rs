//! A bounds-checked walk of LMDB's own structure: every page reachable from a meta page, read
//! from the file with `std::fs` and checked for what LMDB later trusts, before LMDB reads it.
//!
//! LMDB has no page checksums and trusts its pages: a damaged page header or node offset makes
//! it read outside the page, and the process dies inside LMDB (`SIGSEGV` in `mdb_node_search`,
//! `mdb_xcursor_init1`, …). This walk reads the same pages as plain bytes, in safe Rust, and
//! reports each thing LMDB would trust that does not hold, as a [`StructureProblem`] naming the
//! tree, the page and the damage. It never panics on any byte pattern, never recurses (an
//! explicit stack, at most [`TREE_DEPTH_MAX`] levels) and reads each page at most once.
//!
//! # The pages it reads (LMDB 0.9, 64-bit, in the machine's byte order)
//!
//! A page starts with a 16-byte header:
//!
//! | offset | width | field |
//! |---|---|---|
//! | 0 | 8 | page number (its position in the file, in pages) |
//! | 8 | 2 | pad (unused here) |
//! | 10 | 2 | flags: `0x01` branch, `0x02` leaf, `0x04` overflow, `0x08` meta, others never on disk for tessera |
//! | 12 | 2 | `lower`: end of the node offsets (branch and leaf) |
//! | 14 | 2 | `upper`: start of the nodes (branch and leaf) |
//! | 12 | 4 | pages in the run (overflow) |
//!
//! A branch or leaf page holds `(lower − 16) / 2` node offsets (u16 each, from byte 16); each
//! points at a node in `upper .. page end`. A node is an 8-byte header — `lo` (u16), `hi` (u16),
//! `flags` (u16), key length (u16) — then the key, then (in a leaf) the data:
//!
//! - in a branch page, `lo | hi << 16 | flags << 32` is the child's page number;
//! - in a leaf page, `lo | hi << 16` is the data's length; with flag `0x01` (big data) the data
//!   is 8 bytes, the first page of an overflow run that holds the value; with flag `0x02`
//!   (sub-database), found only in the main tree, the key is a keyspace's name and the data
//!   that keyspace's 48-byte tree record; flag `0x04` (duplicates) is never set by tessera,
//!   which opens no database with `MDB_DUPSORT`, and is damage here.
//!
//! A tree record (`MDB_db`, in a meta page for the free-page and the main tree, and in the
//! main tree's leaves for each keyspace) is: pad (u32), flags (u16), depth (u16), branch,
//! leaf and overflow page counts (u64 each), entries (u64), root page (u64; `u64::MAX`: an
//! empty tree).
//!
//! # What it checks
//!
//! For each tree (the free-page tree, the main tree, then every keyspace its leaves name): the
//! tree's flags are ones tessera sets (none; the free-page tree's are not checked, they also
//! hold the environment's flags), its depth is at most [`TREE_DEPTH_MAX`] (LMDB's cursor
//! stack), and an empty tree records no depth, entries or pages. For each page: its number lies in the commit's pages and the file,
//! the header names the page itself, its kind is a branch above the recorded depth and a leaf
//! at it, it was not reached before (no cycle, no page shared by two trees or two parents),
//! `16 ≤ lower ≤ upper ≤ page size` with `lower` even, a branch has a node; for each node: its
//! offset lies in `upper .. page size − 8`, its key (at most 511 bytes) and data fit in the
//! page, its flags are a kind valid there, a branch's child is a page number in range, an
//! overflow run is in range, says so, and is long enough for the value, and a keyspace record
//! is 48 bytes. When a tree's pages all pass, its depth, entries and branch, leaf and overflow
//! page counts must be what its record says.
//!
//! # What it does not cover
//!
//! Damage that happens after the walk (while the file is open, by another writer or the
//! disk); the pages the free-page tree lists as free, which LMDB reuses in a write
//! transaction (the free-page tree's own pages are walked, the lists in its values are not);
//! keys out of order and separator keys that misdirect a lookup, which cannot crash LMDB and
//! which [`Db::check`](crate::Db::check) finds through LMDB; values, which the checksums cover.
//!
//! # Reading entries
//!
//! [`read_entries`] walks the same way and also hands its caller every entry (key and value,
//! a big value read whole from its overflow run) of every leaf page it can read in the
//! keyspaces the caller wants; a page it cannot read is skipped and listed in the report, as
//! [`verify`] lists it. `tessera export --salvage` is built on it: it reads a damaged file
//! that LMDB itself might crash on.

use super::preflight::{self, Meta, TREE_RECORD_BYTES, u16_at, u32_at, u64_at};
use crate::error::{Error, Result};
use std::path::Path;

/// Most levels a B-tree may have: LMDB's cursor stack (`CURSOR_STACK`) holds 32 pages.
///
/// ```
/// use tessera::store::structure::{verify, StructureDamage, TREE_DEPTH_MAX};
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("db");
/// # tessera::Db::open(&path)?.keyspace("notes")?;
/// let report = verify(&path)?;
/// assert!(!report.problems.iter().any(|p| matches!(p.damage, StructureDamage::DepthOutOfRange { .. })));
/// assert_eq!(TREE_DEPTH_MAX, 32);
/// # Ok::<(), tessera::Error>(())
/// ```
pub const TREE_DEPTH_MAX: u16 = 32;

/// Most problems a [`StructureReport`] lists; more are counted.
///
/// ```
/// use tessera::store::structure::{verify, STRUCTURE_PROBLEMS_MAX};
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("db");
/// # tessera::Db::open(&path)?.keyspace("notes")?;
/// let report = verify(&path)?;
/// assert!(report.problems.len() <= STRUCTURE_PROBLEMS_MAX);
/// # Ok::<(), tessera::Error>(())
/// ```
pub const STRUCTURE_PROBLEMS_MAX: usize = 1_000;

/// Bytes of a page header.
const PAGE_HEADER_BYTES: usize = 16;
/// Bytes of a node header.
const NODE_HEADER_BYTES: usize = 8;
/// LMDB's longest key (`MDB_MAXKEYSIZE`).
const KEY_BYTES_MAX: usize = 511;
/// The page number of an empty tree's root.
const PAGE_NONE: u64 = u64::MAX;
/// The first page after the two meta pages.
const FIRST_TREE_PAGE: u64 = 2;

const PAGE_BRANCH: u16 = 0x01;
const PAGE_LEAF: u16 = 0x02;
const PAGE_OVERFLOW: u16 = 0x04;

const NODE_BIG_DATA: u16 = 0x01;
const NODE_SUB_DATABASE: u16 = 0x02;
const NODE_DUPLICATES: u16 = 0x04;

/// Which B-tree a page was reached from.
///
/// ```
/// use tessera::store::structure::Tree;
/// assert_eq!(Tree::Keyspace("notes".into()).to_string(), "keyspace \"notes\"");
/// assert_eq!(Tree::FreePages.to_string(), "(free pages)");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Tree {
    /// LMDB's free-page tree (its pages, not the free pages it lists).
    FreePages,
    /// LMDB's main tree, whose entries are the keyspaces' records.
    Main,
    /// A keyspace (LMDB named database), by name (lossy UTF-8).
    Keyspace(String),
}

impl Tree {
    /// The name [`Db::check`](crate::Db::check) reports the tree under: the keyspace's name,
    /// or `(free pages)` and `(main tree)` for LMDB's own trees.
    ///
    /// ```
    /// use tessera::store::structure::Tree;
    /// assert_eq!(Tree::Keyspace("notes".into()).name(), "notes");
    /// assert_eq!(Tree::Main.name(), "(main tree)");
    /// ```
    pub fn name(&self) -> &str {
        match self {
            Tree::FreePages => "(free pages)",
            Tree::Main => "(main tree)",
            Tree::Keyspace(name) => name,
        }
    }
}

impl std::fmt::Display for Tree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Tree::Keyspace(name) => write!(f, "keyspace {name:?}"),
            other => f.write_str(other.name()),
        }
    }
}

/// A kind of page, as a page's flags or a tree's record say.
///
/// ```
/// use tessera::store::structure::PageKind;
/// assert_eq!(PageKind::Leaf.to_string(), "leaf");
/// assert_eq!(PageKind::Overflow.to_string(), "overflow");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PageKind {
    /// A branch page: keys and child page numbers.
    Branch,
    /// A leaf page: keys and values.
    Leaf,
    /// The first page of an overflow run: one large value.
    Overflow,
}

impl std::fmt::Display for PageKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PageKind::Branch => "branch",
            PageKind::Leaf => "leaf",
            PageKind::Overflow => "overflow",
        })
    }
}

/// What is wrong with a page or a tree.
///
/// ```
/// use tessera::store::structure::{verify, StructureDamage};
/// # let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("db");
/// let db = tessera::Db::open(&path)?;
/// let notes = db.keyspace("notes")?;
/// db.write(|tx| (0..500u32).try_for_each(|i| tx.put(&notes, &i.to_be_bytes(), &[7; 100])))?;
/// let page_bytes = db.file_info()?.page_bytes as usize;
/// db.close()?;
/// // Every page after the two meta pages gets a header that names another page.
/// let mut bytes = std::fs::read(&path)?;
/// bytes.chunks_mut(page_bytes).skip(2).for_each(|page| page[..8].fill(0xEE));
/// std::fs::write(&path, bytes)?;
/// let report = verify(&path)?;
/// assert!(report.problems.iter().any(|p| matches!(p.damage, StructureDamage::WrongPageNumber { .. })), "{report}");
/// # Ok::<(), tessera::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StructureDamage {
    /// The page number is a meta page or lies past the last page of the commit.
    PageOutOfRange {
        /// The commit's last page.
        last_page: u64,
    },
    /// The page lies past the end of the file.
    PastEndOfFile {
        /// The file's length in bytes.
        file_bytes: u64,
    },
    /// The page's header names another page.
    WrongPageNumber {
        /// The number in the header.
        found: u64,
    },
    /// The page's flags are not the kind it is reached as.
    WrongKind {
        /// The flags in the header.
        flags: u16,
        /// The kind it must be.
        expected: PageKind,
    },
    /// The page was reached before (a cycle, or a page shared by two parents or trees).
    ReachedTwice,
    /// The bounds of the page's free space are not `16 ≤ lower ≤ upper ≤ page size`, `lower`
    /// even.
    Bounds {
        /// End of the node offsets.
        lower: u16,
        /// Start of the nodes.
        upper: u16,
    },
    /// A branch page has no node.
    EmptyBranch,
    /// A node's offset lies outside the page's node area.
    NodeOffset {
        /// The node's index in the page.
        node: u16,
        /// Its offset.
        offset: u16,
    },
    /// A node's key or data runs past the end of the page.
    NodeOutsidePage {
        /// The node's index in the page.
        node: u16,
    },
    /// A node's key is longer than LMDB's 511 bytes.
    KeyTooLong {
        /// The node's index in the page.
        node: u16,
        /// The key's length.
        key_bytes: u16,
    },
    /// A leaf node's flags are not a kind valid in this tree.
    NodeFlags {
        /// The node's index in the page.
        node: u16,
        /// Its flags.
        flags: u16,
    },
    /// A node claims duplicate values (`MDB_DUPSORT`), which tessera never uses.
    Duplicates {
        /// The node's index in the page.
        node: u16,
    },
    /// A keyspace's record in the main tree is not 48 bytes.
    TreeRecordSize {
        /// The node's index in the page.
        node: u16,
        /// Its data's length.
        data_bytes: u32,
    },
    /// An overflow run holds fewer pages than its value needs.
    OverflowTooShort {
        /// Pages the value needs.
        needed: u64,
        /// Pages the run's header says it has.
        found: u64,
    },
    /// The tree's record has flags tessera never sets (duplicate sort, integer or reverse
    /// keys).
    TreeFlags {
        /// The record's flags.
        flags: u16,
    },
    /// The tree's record claims more levels than LMDB can walk ([`TREE_DEPTH_MAX`]), or none
    /// for a tree with a root.
    DepthOutOfRange {
        /// The recorded depth.
        depth: u16,
    },
    /// A page's kind does not match its level: a leaf above the recorded depth, or a branch at
    /// it (level 0: an empty tree with a depth).
    Depth {
        /// The tree's recorded depth.
        recorded: u16,
        /// The level of the page (1: the root).
        level: u16,
    },
    /// The tree's record counts another number of entries than its leaves hold.
    Entries {
        /// In the record.
        recorded: u64,
        /// In the leaves.
        found: u64,
    },
    /// A meta page does not parse ([`read_entries`] reads the other one's commit; LMDB
    /// refuses the file).
    MetaPage,
    /// The tree's record counts another number of pages of a kind than the walk met.
    PageCount {
        /// The kind of page.
        kind: PageKind,
        /// In the record.
        recorded: u64,
        /// Met.
        found: u64,
    },
}

impl std::fmt::Display for StructureDamage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use StructureDamage::*;
        match self {
            PageOutOfRange { last_page } => write!(f, "the page number is not one of the commit's pages (2 to {last_page})"),
            PastEndOfFile { file_bytes } => write!(f, "the page lies past the end of the file ({file_bytes} bytes)"),
            WrongPageNumber { found } => write!(f, "the page header names page {found}"),
            WrongKind { flags, expected } => write!(f, "the page's flags {flags:#06x} do not make it a {expected} page"),
            ReachedTwice => f.write_str("the page is reached a second time (a cycle or a shared page)"),
            Bounds { lower, upper } => write!(f, "the page's free space bounds are damaged (lower {lower}, upper {upper})"),
            EmptyBranch => f.write_str("the branch page has no node"),
            NodeOffset { node, offset } => write!(f, "node {node}'s offset {offset} lies outside the page's nodes"),
            NodeOutsidePage { node } => write!(f, "node {node}'s key or data runs past the end of the page"),
            KeyTooLong { node, key_bytes } => write!(f, "node {node}'s key is {key_bytes} bytes, over LMDB's 511"),
            NodeFlags { node, flags } => write!(f, "node {node}'s flags {flags:#06x} are not valid in this tree"),
            Duplicates { node } => write!(f, "node {node} claims duplicate values, which tessera never stores"),
            TreeRecordSize { node, data_bytes } => write!(f, "node {node}'s keyspace record is {data_bytes} bytes, not 48"),
            OverflowTooShort { needed, found } => write!(f, "the overflow run has {found} pages, its value needs {needed}"),
            TreeFlags { flags } => write!(f, "the tree's flags {flags:#06x} are not ones tessera sets"),
            DepthOutOfRange { depth } => write!(f, "the tree's recorded depth {depth} is out of range (1 to {TREE_DEPTH_MAX})"),
            Depth { recorded, level } => write!(f, "the page's kind does not fit its level {level} in a tree of depth {recorded}"),
            Entries { recorded, found } => write!(f, "the tree's record counts {recorded} entries, its leaves hold {found}"),
            MetaPage => f.write_str("the meta page is damaged (the other meta page's commit is read)"),
            PageCount { kind, recorded, found } => write!(f, "the tree's record counts {recorded} {kind} pages, the walk met {found}"),
        }
    }
}

/// One thing the walk found wrong: in which tree, at which page, and what.
///
/// ```
/// use tessera::store::structure::{PageKind, StructureDamage, StructureProblem, Tree};
/// let problem = StructureProblem { tree: Tree::Main, page: 7, damage: StructureDamage::WrongPageNumber { found: 9 } };
/// assert!(problem.to_string().starts_with("(main tree), page 7: "), "{problem}");
/// let _ = PageKind::Branch;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StructureProblem {
    /// The tree the page was reached from.
    pub tree: Tree,
    /// The page (for a problem of the whole tree, its root; `u64::MAX` for an empty tree).
    pub page: u64,
    /// What is wrong.
    pub damage: StructureDamage,
}

impl std::fmt::Display for StructureProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}, page {}: {}", self.tree, self.page, self.damage)
    }
}

/// What [`verify`] found.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("db");
/// let db = tessera::Db::open(&path)?;
/// let notes = db.keyspace("notes")?;
/// db.write(|tx| tx.put(&notes, b"k", b"v"))?;
/// let report = tessera::store::structure::verify(&path)?;
/// assert!(report.is_ok(), "{report}");
/// assert!(report.keyspaces.contains(&"notes".to_owned()));
/// # Ok::<(), tessera::Error>(())
/// ```
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct StructureReport {
    /// The transaction id of the commit walked.
    pub txn_id: u64,
    /// Pages read (branch, leaf and the first page of each overflow run).
    pub pages_read: u64,
    /// The keyspaces the main tree names, in its order (lossy UTF-8).
    pub keyspaces: Vec<String>,
    /// What does not hold, at most [`STRUCTURE_PROBLEMS_MAX`] of them.
    pub problems: Vec<StructureProblem>,
    /// Problems found beyond the ones listed.
    pub problems_not_listed: u64,
}

impl StructureReport {
    /// True when nothing was found wrong.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("db");
    /// tessera::Db::open(&path)?.keyspace("notes")?;
    /// assert!(tessera::store::structure::verify(&path)?.is_ok());
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty() && self.problems_not_listed == 0
    }

    /// True when a problem lies in LMDB's own trees (the main or the free-page tree), so that
    /// no keyspace can be reached safely through LMDB.
    pub(crate) fn lmdb_trees_damaged(&self) -> bool {
        self.problems_not_listed > 0 || self.problems.iter().any(|problem| !matches!(problem.tree, Tree::Keyspace(_)))
    }

    fn problem(&mut self, tree: &Tree, page: u64, damage: StructureDamage) {
        if self.problems.len() < STRUCTURE_PROBLEMS_MAX {
            self.problems.push(StructureProblem { tree: tree.clone(), page, damage });
        } else {
            self.problems_not_listed += 1;
        }
    }
}

impl std::fmt::Display for StructureReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let found = self.problems.len() as u64 + self.problems_not_listed;
        writeln!(f, "commit {}: {} pages read, {} keyspaces, {found} problems", self.txn_id, self.pages_read, self.keyspaces.len())?;
        for problem in &self.problems {
            writeln!(f, "  {problem}")?;
        }
        Ok(())
    }
}

/// Walks the structure of the LMDB file at `path` from its newest meta page, reading it with
/// `std::fs` and writing nothing (see the module docs). LMDB never sees the file. A file that
/// is not LMDB is [`Error::NotADatabase`]; a file another process writes to meanwhile may be
/// reported damaged where a page was freed and reused during the walk. On a 32-bit build the
/// report is empty (the layout differs).
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("db");
/// tessera::Db::open(&path)?.close()?;
/// let mut bytes = std::fs::read(&path)?;
/// let report = tessera::store::structure::verify(&path)?;
/// assert!(report.is_ok());
/// // Damage the header of every page after the two meta pages.
/// for page in bytes.chunks_mut(4096).skip(2) {
///     page[..8].fill(0xEE);
/// }
/// std::fs::write(&path, &bytes)?;
/// let report = tessera::store::structure::verify(&path)?;
/// assert!(!report.is_ok());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn verify(path: impl AsRef<Path>) -> Result<StructureReport> {
    let path = path.as_ref();
    let file = std::fs::File::open(path)?;
    let Some(metas) = preflight::metas(&file)? else { return Err(Error::NotADatabase { path: path.to_path_buf() }) };
    walk(&file, &preflight::newest(metas))
}

/// Walks the commit `txn_id` of the file at `path` (a read transaction of it is open, so its
/// pages stay as they are), or `None` when neither meta page holds it any more (two later
/// commits overwrote both) or the build cannot read LMDB's layout (32-bit).
pub(crate) fn verify_commit(path: &Path, txn_id: u64) -> Result<Option<StructureReport>> {
    if cfg!(not(target_pointer_width = "64")) {
        return Ok(None);
    }
    let file = std::fs::File::open(path)?;
    let Some(metas) = preflight::metas(&file)? else { return Err(Error::NotADatabase { path: path.to_path_buf() }) };
    match metas.into_iter().find(|meta| meta.txn_id == txn_id) {
        Some(meta) => walk(&file, &meta).map(Some),
        None => Ok(None),
    }
}

/// One entry of a keyspace's leaf page, as [`read_entries`] hands it over.
///
/// ```
/// use tessera::store::structure::LeafEntry;
/// let entry = LeafEntry { keyspace: "notes", page: 3, key: b"k", value: b"v" };
/// assert_eq!((entry.keyspace, entry.page), ("notes", 3));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeafEntry<'e> {
    /// The keyspace (lossy UTF-8).
    pub keyspace: &'e str,
    /// The leaf page that holds the entry.
    pub page: u64,
    /// The key.
    pub key: &'e [u8],
    /// The value as stored (with its checksum, in every keyspace but `tessera.meta`).
    pub value: &'e [u8],
}

/// Walks the newest commit of the file at `path` as [`verify`] does, and hands `visit` every
/// entry of every leaf page it can read in each keyspace `wanted` accepts, in key order per
/// keyspace (keyspaces in the main tree's order). A page that fails its checks is skipped
/// and listed in the report; a big value is handed over only when its whole overflow run is
/// sound. Values are as stored: checking their checksums is the caller's job. Every tree is
/// walked whatever `wanted` says (so that the report is [`verify`]'s), but only wanted
/// keyspaces' big values are read. LMDB never sees the file. Unlike LMDB and [`verify`], it
/// reads a file with one damaged meta page: the other one's commit, with the damaged meta
/// page reported ([`StructureDamage::MetaPage`]).
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("db");
/// let db = tessera::Db::open(&path)?;
/// let notes = db.keyspace("notes")?;
/// db.write(|tx| tx.put(&notes, b"big", &vec![7; 10_000]).and_then(|_| tx.put(&notes, b"small", b"v")))?;
/// db.close()?;
/// let mut seen = Vec::new();
/// let report = tessera::store::structure::read_entries(&path, &|name| name == "notes", &mut |entry| {
///     seen.push((entry.key.to_vec(), entry.value.len()));
/// })?;
/// assert!(report.is_ok(), "{report}");
/// // Each value is followed by its 4-byte checksum.
/// assert_eq!(seen, [(b"big".to_vec(), 10_004), (b"small".to_vec(), 5)]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_entries(
    path: impl AsRef<Path>,
    wanted: &dyn Fn(&str) -> bool,
    visit: &mut dyn FnMut(LeafEntry<'_>),
) -> Result<StructureReport> {
    let path = path.as_ref();
    let file = std::fs::File::open(path)?;
    let metas = preflight::readable_metas(&file)?;
    let meta = match metas {
        [Some(first), Some(second)] => preflight::newest([first, second]),
        [Some(only), None] | [None, Some(only)] => only,
        [None, None] => return Err(Error::NotADatabase { path: path.to_path_buf() }),
    };
    let mut report = walk_with(&file, &meta, Some(EntryVisitor { wanted, visit }))?;
    for (page, parsed) in metas.iter().enumerate() {
        if parsed.is_none() {
            report.problem(&Tree::Main, page as u64, StructureDamage::MetaPage);
        }
    }
    Ok(report)
}

/// Where a walk hands the entries of wanted keyspaces.
struct EntryVisitor<'v> {
    wanted: &'v dyn Fn(&str) -> bool,
    visit: &'v mut dyn FnMut(LeafEntry<'_>),
}

/// Walks every tree of the commit `meta` describes.
pub(super) fn walk(file: &std::fs::File, meta: &Meta) -> Result<StructureReport> {
    walk_with(file, meta, None)
}

/// [`walk`], handing the entries of wanted keyspaces to `entries`.
fn walk_with<'f>(file: &'f std::fs::File, meta: &Meta, entries: Option<EntryVisitor<'f>>) -> Result<StructureReport> {
    let mut report = StructureReport { txn_id: meta.txn_id, ..StructureReport::default() };
    if cfg!(not(target_pointer_width = "64")) {
        return Ok(report);
    }
    let file_bytes = file.metadata()?.len();
    let mut walker = Walker::new(file, meta, file_bytes);
    walker.entries = entries;
    let [free, main] = meta.trees.map(|record| TreeRecord::parse(&record));
    walker.walk_tree(&Tree::FreePages, &free, &mut report)?;
    let keyspaces = walker.walk_tree(&Tree::Main, &main, &mut report)?;
    for (name, record) in keyspaces {
        report.keyspaces.push(name.clone());
        walker.walk_tree(&Tree::Keyspace(name), &record, &mut report)?;
    }
    Ok(report)
}

/// A tree's record (`MDB_db`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct TreeRecord {
    flags: u16,
    depth: u16,
    branch_pages: u64,
    leaf_pages: u64,
    overflow_pages: u64,
    entries: u64,
    root: u64,
}

impl TreeRecord {
    fn parse(bytes: &[u8; TREE_RECORD_BYTES]) -> TreeRecord {
        TreeRecord {
            flags: u16_at(bytes, 4),
            depth: u16_at(bytes, 6),
            branch_pages: u64_at(bytes, 8),
            leaf_pages: u64_at(bytes, 16),
            overflow_pages: u64_at(bytes, 24),
            entries: u64_at(bytes, 32),
            root: u64_at(bytes, 40),
        }
    }
}

/// What one tree's walk counted.
#[derive(Debug, Default)]
struct Counts {
    branch_pages: u64,
    leaf_pages: u64,
    overflow_pages: u64,
    entries: u64,
    /// Problems found in this tree's pages.
    damaged: bool,
}

/// Pages reached so far, one bit each.
struct Reached {
    words: Vec<u64>,
}

impl Reached {
    fn new(pages: u64) -> Reached {
        let words = usize::try_from(pages.div_ceil(64)).unwrap_or(usize::MAX);
        Reached { words: vec![0; words] }
    }

    /// Marks `page` (which lies below the count given to `new`); false if it was marked.
    fn mark(&mut self, page: u64) -> bool {
        let (word, bit) = ((page / 64) as usize, page % 64);
        let seen = self.words[word] & (1 << bit) != 0;
        self.words[word] |= 1 << bit;
        !seen
    }
}

struct Walker<'f> {
    file: &'f std::fs::File,
    page_bytes: u64,
    last_page: u64,
    file_bytes: u64,
    reached: Reached,
    /// The page being read (reused).
    page: Vec<u8>,
    /// Who takes the entries of wanted keyspaces ([`read_entries`]), if anyone.
    entries: Option<EntryVisitor<'f>>,
    /// A big value being read from its overflow run (reused).
    value: Vec<u8>,
}

/// A branch or leaf page to read, and its level in its tree (1: the root).
struct Pending {
    page: u64,
    level: u16,
}

impl<'f> Walker<'f> {
    fn new(file: &'f std::fs::File, meta: &Meta, file_bytes: u64) -> Walker<'f> {
        // Pages past the file's end are reported, never marked: the bit set covers the file.
        let pages = meta.last_page.saturating_add(1).min(file_bytes / meta.page_bytes);
        Walker {
            file,
            page_bytes: meta.page_bytes,
            last_page: meta.last_page,
            file_bytes,
            reached: Reached::new(pages),
            page: vec![0; meta.page_bytes as usize],
            entries: None,
            value: Vec::new(),
        }
    }

    /// Checks that `page` is a page of the commit and the file, not reached before; marks it.
    fn reach(&mut self, tree: &Tree, page: u64, report: &mut StructureReport) -> bool {
        let damage = if !(FIRST_TREE_PAGE..=self.last_page).contains(&page) {
            StructureDamage::PageOutOfRange { last_page: self.last_page }
        } else if page.saturating_add(1).saturating_mul(self.page_bytes) > self.file_bytes {
            StructureDamage::PastEndOfFile { file_bytes: self.file_bytes }
        } else if !self.reached.mark(page) {
            StructureDamage::ReachedTwice
        } else {
            return true;
        };
        report.problem(tree, page, damage);
        false
    }

    /// Reads `bytes` bytes of `page` into `self.page`.
    fn read(&mut self, page: u64, bytes: usize, report: &mut StructureReport) -> Result<()> {
        use std::io::{Read, Seek, SeekFrom};
        let mut file = self.file;
        file.seek(SeekFrom::Start(page * self.page_bytes))?;
        file.read_exact(&mut self.page[..bytes])?;
        report.pages_read += 1;
        Ok(())
    }

    /// Walks one tree; returns the keyspace records its leaves hold (the main tree's).
    fn walk_tree(&mut self, tree: &Tree, record: &TreeRecord, report: &mut StructureReport) -> Result<Vec<(String, TreeRecord)>> {
        let mut keyspaces = Vec::new();
        // The free-page tree's flags also hold the environment's flags of the file's creation.
        if *tree != Tree::FreePages && record.flags != 0 {
            report.problem(tree, record.root, StructureDamage::TreeFlags { flags: record.flags });
        }
        if record.root == PAGE_NONE {
            if record.depth != 0 {
                report.problem(tree, PAGE_NONE, StructureDamage::Depth { recorded: record.depth, level: 0 });
            }
            self.compare_counts(tree, record, &Counts::default(), report);
            return Ok(keyspaces);
        }
        if !(1..=TREE_DEPTH_MAX).contains(&record.depth) {
            report.problem(tree, record.root, StructureDamage::DepthOutOfRange { depth: record.depth });
            return Ok(keyspaces);
        }
        let mut counts = Counts::default();
        let mut stack = vec![Pending { page: record.root, level: 1 }];
        while let Some(pending) = stack.pop() {
            let listed = report.problems.len() as u64 + report.problems_not_listed;
            self.walk_page(tree, record.depth, pending, &mut stack, &mut counts, &mut keyspaces, report)?;
            counts.damaged |= report.problems.len() as u64 + report.problems_not_listed > listed;
        }
        if !counts.damaged {
            self.compare_counts(tree, record, &counts, report);
        }
        Ok(keyspaces)
    }

    /// Reports counts that differ from the tree's record.
    fn compare_counts(&self, tree: &Tree, record: &TreeRecord, counts: &Counts, report: &mut StructureReport) {
        if counts.entries != record.entries {
            report.problem(tree, record.root, StructureDamage::Entries { recorded: record.entries, found: counts.entries });
        }
        let pages = [
            (PageKind::Branch, record.branch_pages, counts.branch_pages),
            (PageKind::Leaf, record.leaf_pages, counts.leaf_pages),
            (PageKind::Overflow, record.overflow_pages, counts.overflow_pages),
        ];
        for (kind, recorded, found) in pages {
            if recorded != found {
                report.problem(tree, record.root, StructureDamage::PageCount { kind, recorded, found });
            }
        }
    }

    /// Checks one branch or leaf page; pushes a branch's children.
    #[allow(clippy::too_many_arguments)]
    fn walk_page(
        &mut self,
        tree: &Tree,
        depth: u16,
        pending: Pending,
        stack: &mut Vec<Pending>,
        counts: &mut Counts,
        keyspaces: &mut Vec<(String, TreeRecord)>,
        report: &mut StructureReport,
    ) -> Result<()> {
        let Pending { page, level } = pending;
        if !self.reach(tree, page, report) {
            return Ok(());
        }
        self.read(page, self.page_bytes as usize, report)?;
        let Some(node_offsets) = self.check_header(tree, page, depth, level, report) else { return Ok(()) };
        let is_branch = level < depth;
        if is_branch {
            counts.branch_pages += 1;
        } else {
            counts.leaf_pages += 1;
        }
        // Children are pushed in reverse, so that the walk reads a tree left to right.
        let mut children = Vec::new();
        for node in 0..node_offsets {
            let Some(node) = self.check_node(tree, page, node, report) else { continue };
            if is_branch {
                children.push(Pending { page: node.child_page(), level: level + 1 });
            } else {
                counts.entries += 1;
                self.check_leaf_node(tree, page, &node, counts, keyspaces, report)?;
            }
        }
        stack.extend(children.into_iter().rev());
        Ok(())
    }

    /// Checks the header of the branch or leaf page in `self.page`; the number of its nodes.
    fn check_header(&self, tree: &Tree, page: u64, depth: u16, level: u16, report: &mut StructureReport) -> Option<u16> {
        let bytes = &self.page;
        let found = u64_at(bytes, 0);
        if found != page {
            report.problem(tree, page, StructureDamage::WrongPageNumber { found });
            return None;
        }
        let flags = u16_at(bytes, 10);
        let expected = if level < depth { PageKind::Branch } else { PageKind::Leaf };
        let expected_flags = if expected == PageKind::Branch { PAGE_BRANCH } else { PAGE_LEAF };
        if flags != expected_flags {
            let damage = if flags == PAGE_BRANCH || flags == PAGE_LEAF {
                StructureDamage::Depth { recorded: depth, level }
            } else {
                StructureDamage::WrongKind { flags, expected }
            };
            report.problem(tree, page, damage);
            return None;
        }
        let (lower, upper) = (u16_at(bytes, 12), u16_at(bytes, 14));
        let page_bytes = self.page_bytes;
        if usize::from(lower) < PAGE_HEADER_BYTES || lower % 2 != 0 || lower > upper || u64::from(upper) > page_bytes {
            report.problem(tree, page, StructureDamage::Bounds { lower, upper });
            return None;
        }
        let nodes = (lower - PAGE_HEADER_BYTES as u16) / 2;
        if nodes == 0 && expected == PageKind::Branch {
            report.problem(tree, page, StructureDamage::EmptyBranch);
            return None;
        }
        Some(nodes)
    }

    /// Checks that node `index` of `self.page` lies in the page's nodes and its key fits.
    fn check_node(&self, tree: &Tree, page: u64, index: u16, report: &mut StructureReport) -> Option<Node> {
        let bytes = &self.page;
        let offset = u16_at(bytes, PAGE_HEADER_BYTES + 2 * usize::from(index));
        let upper = u16_at(bytes, 14);
        let start = usize::from(offset);
        if offset < upper || start + NODE_HEADER_BYTES > bytes.len() {
            report.problem(tree, page, StructureDamage::NodeOffset { node: index, offset });
            return None;
        }
        let node = Node {
            index,
            start,
            low: u16_at(bytes, start),
            high: u16_at(bytes, start + 2),
            flags: u16_at(bytes, start + 4),
            key_bytes: u16_at(bytes, start + 6),
        };
        if usize::from(node.key_bytes) > KEY_BYTES_MAX {
            report.problem(tree, page, StructureDamage::KeyTooLong { node: index, key_bytes: node.key_bytes });
            return None;
        }
        if node.data_start() > bytes.len() {
            report.problem(tree, page, StructureDamage::NodeOutsidePage { node: index });
            return None;
        }
        Some(node)
    }

    /// Checks a leaf node's flags and data; collects a keyspace record of the main tree.
    fn check_leaf_node(
        &mut self,
        tree: &Tree,
        page: u64,
        node: &Node,
        counts: &mut Counts,
        keyspaces: &mut Vec<(String, TreeRecord)>,
        report: &mut StructureReport,
    ) -> Result<()> {
        let index = node.index;
        if node.flags & NODE_DUPLICATES != 0 {
            report.problem(tree, page, StructureDamage::Duplicates { node: index });
            return Ok(());
        }
        let sub_database_allowed = *tree == Tree::Main;
        let valid = match node.flags {
            0 | NODE_BIG_DATA => true,
            NODE_SUB_DATABASE => sub_database_allowed,
            _ => false,
        };
        if !valid {
            report.problem(tree, page, StructureDamage::NodeFlags { node: index, flags: node.flags });
            return Ok(());
        }
        let data_bytes = node.data_bytes();
        let stored_bytes = if node.flags == NODE_BIG_DATA { 8 } else { data_bytes as usize };
        let Some(data) = self.page.get(node.data_start()..node.data_start() + stored_bytes) else {
            report.problem(tree, page, StructureDamage::NodeOutsidePage { node: index });
            return Ok(());
        };
        if node.flags == NODE_SUB_DATABASE {
            let Ok(record) = <&[u8; TREE_RECORD_BYTES]>::try_from(data) else {
                report.problem(tree, page, StructureDamage::TreeRecordSize { node: index, data_bytes });
                return Ok(());
            };
            let name = &self.page[node.start + NODE_HEADER_BYTES..node.data_start()];
            keyspaces.push((String::from_utf8_lossy(name).into_owned(), TreeRecord::parse(record)));
        } else if node.flags == NODE_BIG_DATA {
            let first = u64_at(data, 0);
            let sound = self.check_overflow(tree, first, data_bytes, counts, report)?;
            if sound && self.wants(tree) {
                self.read_value(first, data_bytes)?;
                self.hand_over(tree, page, node, None);
            }
        } else if self.wants(tree) {
            self.hand_over(tree, page, node, Some(stored_bytes));
        }
        Ok(())
    }

    /// Whether the entries of `tree` go to the caller.
    fn wants(&self, tree: &Tree) -> bool {
        match (&self.entries, tree) {
            (Some(entries), Tree::Keyspace(name)) => (entries.wanted)(name),
            _ => false,
        }
    }

    /// Hands `node` of `self.page` to the caller: its data in the page (`inline_bytes` of
    /// them), or the big value in `self.value`. The node's key and data lie in the page
    /// (checked by `check_node` and `check_leaf_node`).
    fn hand_over(&mut self, tree: &Tree, page: u64, node: &Node, inline_bytes: Option<usize>) {
        let (Some(entries), Tree::Keyspace(keyspace)) = (&mut self.entries, tree) else { return };
        let key = &self.page[node.start + NODE_HEADER_BYTES..node.data_start()];
        let value = match inline_bytes {
            Some(bytes) => &self.page[node.data_start()..node.data_start() + bytes],
            None => &self.value[..],
        };
        (entries.visit)(LeafEntry { keyspace, page, key, value });
    }

    /// Reads the big value of `data_bytes` bytes from the overflow run starting at `first`
    /// (checked to lie in the file) into `self.value`.
    fn read_value(&mut self, first: u64, data_bytes: u32) -> Result<()> {
        use std::io::{Read, Seek, SeekFrom};
        let mut file = self.file;
        file.seek(SeekFrom::Start(first * self.page_bytes + PAGE_HEADER_BYTES as u64))?;
        self.value.resize(data_bytes as usize, 0);
        file.read_exact(&mut self.value)?;
        Ok(())
    }

    /// Checks the overflow run starting at `first` that holds a value of `data_bytes`; whether
    /// the whole run is sound. The leaf page in `self.page` is left as it is.
    fn check_overflow(
        &mut self,
        tree: &Tree,
        first: u64,
        data_bytes: u32,
        counts: &mut Counts,
        report: &mut StructureReport,
    ) -> Result<bool> {
        if !self.reach(tree, first, report) {
            return Ok(false);
        }
        let header = self.read_header(first, report)?;
        let (found, flags, pages) = (u64_at(&header, 0), u16_at(&header, 10), u64::from(u32_at(&header, 12)));
        if found != first {
            report.problem(tree, first, StructureDamage::WrongPageNumber { found });
            return Ok(false);
        }
        if flags != PAGE_OVERFLOW {
            report.problem(tree, first, StructureDamage::WrongKind { flags, expected: PageKind::Overflow });
            return Ok(false);
        }
        // LMDB's OVPAGES: the header and the value, in whole pages. A run may be longer (a
        // smaller value rewritten in place keeps its run).
        let needed = (PAGE_HEADER_BYTES as u64 - 1 + u64::from(data_bytes)) / self.page_bytes + 1;
        if pages < needed {
            report.problem(tree, first, StructureDamage::OverflowTooShort { needed, found: pages });
            return Ok(false);
        }
        counts.overflow_pages += pages;
        for page in first + 1..first.saturating_add(pages) {
            if !self.reach(tree, page, report) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Reads the header of `page` (into a buffer of its own: the leaf page that names an
    /// overflow run stays in `self.page` while its other nodes are checked).
    fn read_header(&mut self, page: u64, report: &mut StructureReport) -> Result<[u8; PAGE_HEADER_BYTES]> {
        use std::io::{Read, Seek, SeekFrom};
        let mut file = self.file;
        file.seek(SeekFrom::Start(page * self.page_bytes))?;
        let mut header = [0u8; PAGE_HEADER_BYTES];
        file.read_exact(&mut header)?;
        report.pages_read += 1;
        Ok(header)
    }
}

/// A node's header, read from a page (its offset checked).
struct Node {
    index: u16,
    /// Byte offset of the node in its page.
    start: usize,
    low: u16,
    high: u16,
    flags: u16,
    key_bytes: u16,
}

impl Node {
    /// A branch node's child.
    fn child_page(&self) -> u64 {
        u64::from(self.low) | u64::from(self.high) << 16 | u64::from(self.flags) << 32
    }

    /// A leaf node's data length (for big data, the value's, not the 8 bytes stored here).
    fn data_bytes(&self) -> u32 {
        u32::from(self.low) | u32::from(self.high) << 16
    }

    /// Where the node's data starts in its page.
    fn data_start(&self) -> usize {
        self.start + NODE_HEADER_BYTES + usize::from(self.key_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Db, DbOptions};

    const PAGE_BYTES: usize = 4096;

    /// A file with a tree of depth 3, large values (overflow runs), an emptied keyspace and
    /// several keyspaces, written without the write map so that it is its used pages.
    fn sound_file(dir: &Path) -> std::path::PathBuf {
        let path = dir.join("sound.tessera");
        let db = Db::open_with(&path, DbOptions { write_map: false, ..DbOptions::default() }).unwrap();
        let many = db.keyspace("many").unwrap();
        let large = db.keyspace("large").unwrap();
        let emptied = db.keyspace("emptied").unwrap();
        db.write(|tx| (0..20_000u32).try_for_each(|i| tx.put(&many, &i.to_be_bytes(), &[i as u8; 40]))).unwrap();
        db.write(|tx| (0..20u32).try_for_each(|i| tx.put(&large, &i.to_be_bytes(), &vec![i as u8; 3000 + 5000 * i as usize]))).unwrap();
        // A value rewritten smaller keeps its longer overflow run.
        db.write(|tx| tx.put(&large, &5u32.to_be_bytes(), &[1; 5000])).unwrap();
        db.write(|tx| tx.put(&emptied, b"k", b"v")).unwrap();
        db.write(|tx| tx.delete(&emptied, b"k").map(drop)).unwrap();
        db.close().unwrap();
        path
    }

    #[test]
    fn a_sound_file_walks_clean_and_counts_every_page() {
        let dir = tempfile::tempdir().unwrap();
        let path = sound_file(dir.path());
        let report = verify(&path).unwrap();
        assert!(report.is_ok(), "{report}");
        for name in ["many", "large", "emptied", "tessera.meta"] {
            assert!(report.keyspaces.iter().any(|keyspace| keyspace == name), "{name}: {report}");
        }
        let pages = std::fs::metadata(&path).unwrap().len() / PAGE_BYTES as u64;
        assert!(report.pages_read > 100 && report.pages_read <= pages, "{report}");
    }

    /// A leaf page of `keyspace` and a branch page above it, found by walking the sound file.
    fn pages_of(path: &Path) -> (u64, u64) {
        let bytes = std::fs::read(path).unwrap();
        let page = |number: usize| &bytes[number * PAGE_BYTES..(number + 1) * PAGE_BYTES];
        let flags = |number: usize| u16_at(page(number), 10);
        let pages = bytes.len() / PAGE_BYTES;
        let branch = (2..pages).find(|&number| flags(number) == PAGE_BRANCH).expect("a branch page");
        let leaf = (2..pages).find(|&number| flags(number) == PAGE_LEAF && u16_at(page(number), 12) > 40).expect("a leaf page");
        (branch as u64, leaf as u64)
    }

    fn damaged(path: &Path, page: u64, at: usize, damage: &[u8]) -> StructureReport {
        let mut bytes = std::fs::read(path).unwrap();
        let start = page as usize * PAGE_BYTES + at;
        bytes[start..start + damage.len()].copy_from_slice(damage);
        let copy = path.with_extension("damaged");
        std::fs::write(&copy, bytes).unwrap();
        verify(&copy).unwrap()
    }

    #[test]
    fn damage_to_headers_and_node_offsets_names_the_page() {
        let dir = tempfile::tempdir().unwrap();
        let path = sound_file(dir.path());
        let (branch, leaf) = pages_of(&path);
        let cases: [(&str, u64, usize, &[u8]); 6] = [
            ("page number", branch, 0, &[0xEE; 8]),
            ("flags", branch, 10, &[0x40, 0]),
            ("lower past upper", leaf, 12, &[0xF0, 0x0F]),
            ("upper past the page", leaf, 14, &[0xFF, 0xFF]),
            ("a node offset", leaf, 16, &[0x02, 0]),
            ("a child page number", branch, 16, &[0xFF; 8]),
        ];
        for (what, page, at, damage) in cases {
            let report = damaged(&path, page, at, damage);
            assert!(!report.is_ok(), "{what}: not found");
            assert!(report.problems.iter().any(|problem| problem.page == page || what == "a child page number"), "{what}: {report}");
        }
        // A node offset into the page header: the problem names the page and the node.
        let report = damaged(&path, leaf, 16, &[0x08, 0]);
        let expected = StructureDamage::NodeOffset { node: 0, offset: 8 };
        assert!(report.problems.iter().any(|problem| problem.page == leaf && problem.damage == expected), "{report}");
    }

    #[test]
    fn random_damage_is_reported_never_a_panic() {
        // Byte flips, runs of bytes and whole words anywhere in the file, including the meta
        // pages: the walk returns (a report or an error), whatever it meets.
        let dir = tempfile::tempdir().unwrap();
        let path = sound_file(dir.path());
        let bytes = std::fs::read(&path).unwrap();
        let copy = path.with_extension("random");
        let mut random = fastrand::Rng::with_seed(15);
        let mut flagged = 0;
        let rounds = 400;
        for _ in 0..rounds {
            let mut damaged = bytes.clone();
            for _ in 0..random.usize(1..4) {
                let page = random.usize(0..bytes.len() / PAGE_BYTES);
                // Mostly where LMDB's structure lives: headers, node offsets, node headers.
                let at = page * PAGE_BYTES + if random.bool() { random.usize(0..64) } else { random.usize(0..PAGE_BYTES - 8) };
                let len = random.usize(1..9);
                for byte in &mut damaged[at..at + len] {
                    *byte = if random.bool() { random.u8(..) } else { *byte ^ 0xFF };
                }
            }
            std::fs::write(&copy, &damaged).unwrap();
            match verify(&copy) {
                Ok(report) => flagged += usize::from(!report.is_ok()),
                Err(Error::NotADatabase { .. }) => flagged += 1,
                Err(other) => panic!("{other:?}"),
            }
        }
        assert!(flagged > rounds / 4, "only {flagged} of {rounds} damaged copies flagged");
    }

    #[test]
    fn pages_past_the_file_and_cycles_are_reported() {
        // A tree whose branch points back at itself, and one whose child lies past the end.
        let dir = tempfile::tempdir().unwrap();
        let path = sound_file(dir.path());
        let (branch, _) = pages_of(&path);
        let bytes = std::fs::read(&path).unwrap();
        let node = usize::from(u16_at(&bytes[branch as usize * PAGE_BYTES..], 16));
        let mut pointer = [0u8; 6];
        pointer[..2].copy_from_slice(&(branch as u16).to_ne_bytes());
        pointer[2..4].copy_from_slice(&((branch >> 16) as u16).to_ne_bytes());
        let report = damaged(&path, branch, node, &pointer);
        assert!(
            report.problems.iter().any(|problem| problem.page == branch && problem.damage == StructureDamage::ReachedTwice),
            "{report}"
        );
        let truncated = path.with_extension("short");
        std::fs::write(&truncated, &bytes[..bytes.len() / PAGE_BYTES / 2 * PAGE_BYTES]).unwrap();
        let report = verify(&truncated).unwrap();
        assert!(report.problems.iter().any(|problem| matches!(problem.damage, StructureDamage::PastEndOfFile { .. })), "{report}");
    }
}
