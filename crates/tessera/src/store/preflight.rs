//! What open checks before LMDB touches a file: that an existing file is an LMDB file whose
//! newest meta page fits inside it.
//!
//! LMDB, opening a file, maps at least up to the last page its newest meta page names and, with
//! `MDB_WRITEMAP`, sets the file's length to the map's: a truncated or damaged file would be
//! extended before tessera could refuse it, and a lock file made beside it. So the two meta
//! pages are read here first, as LMDB reads them (`mdb_env_read_header`), and a file that LMDB
//! would refuse or grow is refused with nothing written and no lock file made.
//!
//! An LMDB meta page (64-bit build, in the machine's byte order; 32-bit builds lay it out
//! differently and skip this check) is a 16-byte page header whose flags (a u16
//! at byte 10) include `P_META` (0x08), then the meta body:
//!
//! | body offset | width | field |
//! |---|---|---|
//! | 0 | 4 | magic, `0xBEEFC0DE` |
//! | 4 | 4 | data version, 1 |
//! | 24 | 4 | page size (the free database's `md_pad`) |
//! | 64 | 8 | root page of the free-page database (`u64::MAX`: none) |
//! | 112 | 8 | root page of the main database (`u64::MAX`: none) |
//! | 120 | 8 | last used page number |
//! | 128 | 8 | id of the transaction that wrote this meta page |
//!
//! The first meta page is at byte 0, the second one page size later; LMDB uses the one with the
//! larger transaction id. Each root page named there must lie inside the file and say so: its
//! header's page number (a u64 at byte 0) is its own, and its flags mark a branch (0x01) or a
//! leaf (0x02). That catches a file whose pages were overwritten wholesale, on which LMDB
//! would crash. Damage deeper in the trees still reaches LMDB (`docs/storage.md` says what
//! can still crash the process) unless `DbOptions::verify_structure_on_open` asks for the walk
//! of every page (`structure`), which runs here too, after these checks.

use crate::error::{Error, Result};
use std::io::Read;
use std::path::Path;

/// Bytes of an LMDB page header.
const PAGE_HEADER_BYTES: usize = 16;
/// Bytes LMDB reads of each meta page: the header and the meta body.
const META_READ_BYTES: usize = PAGE_HEADER_BYTES + 136;
/// `P_META`, in the page header's flags.
const PAGE_FLAG_META: u16 = 0x08;
/// `P_BRANCH` and `P_LEAF`, in the page header's flags.
const PAGE_FLAGS_TREE: u16 = 0x01 | 0x02;
/// The page number LMDB stores for an empty tree's root.
const PAGE_NONE: u64 = u64::MAX;
/// LMDB's magic number.
const LMDB_MAGIC: u32 = 0xBEEF_C0DE;
/// LMDB's data format version (`MDB_DATA_VERSION`).
const LMDB_DATA_VERSION: u32 = 1;
/// Page sizes LMDB uses: a power of two in this range.
const PAGE_BYTES_MIN: u64 = 512;
const PAGE_BYTES_MAX: u64 = 64 * 1024;

/// What the file at a path is, as far as open needs to know before LMDB opens it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileState {
    /// Missing or empty: LMDB creates it.
    New,
    /// An LMDB file whose newest meta page's pages all lie inside its first `map_bytes`.
    Lmdb {
        /// The file's length in whole pages: the map to open it with, which holds every
        /// committed page and needs no disk block the file does not have.
        map_bytes: u64,
    },
}

/// One meta page's fields that matter here.
#[derive(Debug, Clone, Copy)]
pub(super) struct Meta {
    pub(super) page_bytes: u64,
    pub(super) last_page: u64,
    pub(super) txn_id: u64,
    /// Root pages of the free-page and the main database.
    pub(super) roots: [u64; 2],
    /// The free-page and the main database's records (`MDB_db`, 48 bytes each at body offsets
    /// 24 and 72), as `structure` reads them.
    pub(super) trees: [[u8; TREE_RECORD_BYTES]; 2],
}

/// Bytes of a B-tree's record (`MDB_db`) in a meta page or a named database's leaf node.
pub(super) const TREE_RECORD_BYTES: usize = 48;

// LMDB writes its pages in the machine's byte order.
pub(super) fn u16_at(bytes: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes(bytes[at..at + 2].try_into().expect("2 bytes"))
}

pub(super) fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

pub(super) fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_ne_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

/// Parses the meta page whose first `META_READ_BYTES` bytes are `page`; `None` if LMDB would
/// not take it.
fn meta(page: &[u8]) -> Option<Meta> {
    let body = PAGE_HEADER_BYTES;
    let is_meta = u16_at(page, 10) & PAGE_FLAG_META != 0;
    if !is_meta || u32_at(page, body) != LMDB_MAGIC || u32_at(page, body + 4) != LMDB_DATA_VERSION {
        return None;
    }
    let page_bytes = u64::from(u32_at(page, body + 24));
    if !page_bytes.is_power_of_two() || !(PAGE_BYTES_MIN..=PAGE_BYTES_MAX).contains(&page_bytes) {
        return None;
    }
    Some(Meta {
        page_bytes,
        last_page: u64_at(page, body + 120),
        txn_id: u64_at(page, body + 128),
        roots: [u64_at(page, body + 64), u64_at(page, body + 112)],
        trees: [body + 24, body + 72].map(|at| page[at..at + TREE_RECORD_BYTES].try_into().expect("48 bytes")),
    })
}

/// Reads `META_READ_BYTES` at `offset`; `None` past the end.
fn read_at(file: &std::fs::File, offset: u64) -> Result<Option<[u8; META_READ_BYTES]>> {
    use std::io::{Seek, SeekFrom};
    let mut file = file;
    file.seek(SeekFrom::Start(offset))?;
    let mut page = [0u8; META_READ_BYTES];
    let mut filled = 0;
    while filled < page.len() {
        match file.read(&mut page[filled..])? {
            0 => return Ok(None),
            read => filled += read,
        }
    }
    Ok(Some(page))
}

/// How many times a verdict of damage is checked again when another process committed
/// meanwhile (its commit can free and reuse the pages that were read).
const ATTEMPTS_MAX: u32 = 16;

/// Checks the file at `path` without writing to it (see the module docs); with
/// `verify_structure`, also walks every page of its newest commit (`structure`) and refuses a
/// file with structural damage as `Error::Corrupted` naming the first damaged page.
pub(crate) fn check(path: &Path, verify_structure: bool) -> Result<FileState> {
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(FileState::New),
        Err(error) => return Err(error.into()),
    };
    let mut attempt = 1;
    loop {
        let (verdict, txn_id) = check_once(path, &file, verify_structure)?;
        // Damage that another process's commit may explain (it grew the file or moved a root
        // between two reads) is looked at again; damage seen twice at one commit is real.
        let damaged = matches!(verdict, Err(Error::Corrupted(_)));
        if !damaged || attempt >= ATTEMPTS_MAX || newest_txn_id(&file)? == txn_id {
            return verdict;
        }
        attempt += 1;
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// The transaction id of the newest meta page, if both parse.
fn newest_txn_id(file: &std::fs::File) -> Result<Option<u64>> {
    Ok(metas(file)?.map(|[first, second]| first.txn_id.max(second.txn_id)))
}

/// Both meta pages, if both parse as LMDB would take them.
pub(super) fn metas(file: &std::fs::File) -> Result<Option<[Meta; 2]>> {
    let Some(first) = read_at(file, 0)?.as_ref().and_then(|page| meta(page)) else { return Ok(None) };
    let Some(second) = read_at(file, first.page_bytes)?.as_ref().and_then(|page| meta(page)) else { return Ok(None) };
    Ok(Some([first, second]))
}

/// The meta pages that parse, for a salvage, which reads what it can: the first at byte 0, the
/// second one page later (when the first does not parse, at each page size LMDB uses). LMDB
/// itself refuses a file with either meta page damaged.
pub(super) fn readable_metas(file: &std::fs::File) -> Result<[Option<Meta>; 2]> {
    let first = read_at(file, 0)?.as_ref().and_then(|page| meta(page));
    let sizes: Vec<u64> = match first {
        Some(first) => vec![first.page_bytes],
        None => (PAGE_BYTES_MIN.trailing_zeros()..=PAGE_BYTES_MAX.trailing_zeros()).map(|shift| 1u64 << shift).collect(),
    };
    for page_bytes in sizes {
        let second = read_at(file, page_bytes)?.as_ref().and_then(|page| meta(page));
        if let Some(second) = second.filter(|second| second.page_bytes == page_bytes) {
            return Ok([first, Some(second)]);
        }
    }
    Ok([first, None])
}

/// The meta page LMDB reads a new transaction from: the one with the larger transaction id,
/// the first on a tie (`mdb_env_pick_meta`).
pub(super) fn newest(metas: [Meta; 2]) -> Meta {
    let [first, second] = metas;
    if second.txn_id > first.txn_id { second } else { first }
}

/// One look at the file: the verdict, and the id of the commit it was made at.
fn check_once(path: &Path, file: &std::fs::File, verify_structure: bool) -> Result<(Result<FileState>, Option<u64>)> {
    let len_bytes = file.metadata()?.len();
    if len_bytes == 0 {
        return Ok((Ok(FileState::New), None));
    }
    if cfg!(not(target_pointer_width = "64")) {
        return Ok((Ok(FileState::Lmdb { map_bytes: len_bytes }), None));
    }
    let Some(metas) = metas(file)? else { return Ok((Err(Error::NotADatabase { path: path.to_path_buf() }), None)) };
    let newest = newest(metas);
    let txn_id = Some(newest.txn_id);
    let needed_bytes = newest.last_page.checked_add(1).and_then(|pages| pages.checked_mul(newest.page_bytes));
    if !matches!(needed_bytes, Some(needed) if needed <= len_bytes) {
        let message = format!(
            "{}: the file is {len_bytes} bytes, but its last commit uses {} pages of {} bytes (truncated or damaged)",
            path.display(),
            newest.last_page.saturating_add(1),
            newest.page_bytes
        );
        return Ok((Err(Error::Corrupted(message)), txn_id));
    }
    for root in newest.roots.into_iter().filter(|&root| root != PAGE_NONE) {
        let header = match root.checked_mul(newest.page_bytes).filter(|_| root <= newest.last_page) {
            Some(offset) => read_at(file, offset)?,
            None => None,
        };
        let is_tree_page = header.is_some_and(|page| u64_at(&page, 0) == root && u16_at(&page, 10) & PAGE_FLAGS_TREE != 0);
        if !is_tree_page {
            let message = format!("{}: the root page {root} of a B-tree is damaged", path.display());
            return Ok((Err(Error::Corrupted(message)), txn_id));
        }
    }
    if verify_structure {
        let report = super::structure::walk(file, &newest)?;
        if let Some(first) = report.problems.first() {
            let more = match report.problems.len() as u64 - 1 + report.problems_not_listed {
                0 => String::new(),
                more => format!("{more} more structural problems; "),
            };
            let message =
                format!("{}: {first} ({more}found by DbOptions::verify_structure_on_open before LMDB read the file)", path.display());
            return Ok((Err(Error::Corrupted(message)), txn_id));
        }
    }
    // A partial page at the end (a write cut short by a full disk) holds nothing committed.
    let map_bytes = len_bytes - len_bytes % newest.page_bytes;
    Ok((Ok(FileState::Lmdb { map_bytes }), txn_id))
}
