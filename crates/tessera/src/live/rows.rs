//! A live result's rows, compactly: each row's sort key (the order's components, then the
//! primary key), in result order, front-coded in one buffer, and nothing else. No decoded
//! record is kept: a delivery takes its records from the commit's batch (rows it changed), the
//! previous delivery (rows it did not) or storage (see `state.rs`).
//!
//! **Layout.** Row by row: the length of the prefix it shares with the previous row's sort
//! key, the length of the rest, the rest, and (ordered results only) the primary key's length;
//! lengths as LEB128 varints. Every [`RESTART_INTERVAL`]th row shares nothing and its offset is
//! kept, so a search is a binary search over those rows, then a walk of at most
//! `RESTART_INTERVAL` rows. Neighbouring sort keys share most of their bytes (an order's equal
//! or close values, keys with a common prefix), so a 1,000-row result ordered by an integer
//! costs about 19 bytes a row where its sort keys are 28.

use crate::collection::sort_key;
use smallvec::SmallVec;
use std::cmp::Ordering;

/// Rows between two rows stored whole (a search walks at most this many).
pub(super) const RESTART_INTERVAL: usize = 16;
/// The most bytes one result's rows take: restart offsets are 32-bit.
pub(super) const ROWS_BYTES_MAX: usize = u32::MAX as usize;

/// Bytes a row takes, as [`Rows::sorted_like`] first reserves them (a result ordered by an
/// integer takes about 19).
const ROW_BYTES_GUESS: usize = 24;

/// Bytes of rows held inside [`Rows`] itself: a result of a row or two (a query by key) is
/// read with its subscription's state, not from a block of its own.
const INLINE_BYTES: usize = 32;

/// Sort keys of a result in order (see the module docs).
pub(super) struct Rows {
    bytes: SmallVec<[u8; INLINE_BYTES]>,
    /// Offset in `bytes` of rows 0, `RESTART_INTERVAL`, 2 × `RESTART_INTERVAL`, …
    restarts: SmallVec<[u32; 2]>,
    len: usize,
    /// The last row's sort key (what the next row is coded against).
    last: Vec<u8>,
    /// Sort keys have order components before the primary key (else they are the key).
    ordered: bool,
}

/// A buffer rows are written to: a result's own, or the plain vector of a result written whole
/// ([`Rows::sorted_like`]).
trait RowBytes {
    fn push_byte(&mut self, byte: u8);
    fn push_bytes(&mut self, bytes: &[u8]);
}

impl RowBytes for SmallVec<[u8; INLINE_BYTES]> {
    fn push_byte(&mut self, byte: u8) {
        self.push(byte);
    }

    fn push_bytes(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

impl RowBytes for Vec<u8> {
    fn push_byte(&mut self, byte: u8) {
        self.push(byte);
    }

    fn push_bytes(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// Appends `value` as a LEB128 varint.
fn put_varint(out: &mut impl RowBytes, mut value: usize) {
    while value >= 0x80 {
        out.push_byte((value as u8) | 0x80);
        value >>= 7;
    }
    out.push_byte(value as u8); // a row's lengths are almost always this one byte
}

/// Appends the row `sort` (primary key from `key_start`) sharing `shared` bytes with the row
/// before (see the module docs).
fn put_row(out: &mut impl RowBytes, sort: &[u8], key_start: usize, shared: usize, ordered: bool) {
    assert!(key_start <= sort.len(), "the primary key is the sort key's tail");
    assert!(ordered || key_start == 0, "an unordered result's sort key is its primary key");
    put_varint(out, shared);
    put_varint(out, sort.len() - shared);
    out.push_bytes(&sort[shared..]);
    if ordered {
        put_varint(out, sort.len() - key_start);
    }
}

/// How many bytes row `index`, whose encoding starts at `offset`, shares with `previous` (the
/// row before's sort key): none when it starts a block, whose offset goes into `restarts`.
fn shared_or_restart(index: usize, offset: usize, restarts: &mut SmallVec<[u32; 2]>, previous: &[u8], sort: &[u8]) -> usize {
    if !index.is_multiple_of(RESTART_INTERVAL) {
        return shared_prefix_len(previous, sort);
    }
    assert!(offset <= ROWS_BYTES_MAX, "a live result's rows exceed {ROWS_BYTES_MAX} bytes");
    restarts.push(offset as u32);
    0
}

/// Reads a LEB128 varint at `*offset` (written by [`put_varint`]) and moves past it.
#[inline]
fn get_varint(bytes: &[u8], offset: &mut usize) -> usize {
    let byte = bytes[*offset];
    if byte < 0x80 {
        *offset += 1;
        return byte as usize; // a row's lengths are almost always this short
    }
    get_long_varint(bytes, offset)
}

/// [`get_varint`] for a varint of more than one byte.
#[inline(never)]
fn get_long_varint(bytes: &[u8], offset: &mut usize) -> usize {
    let mut value = 0usize;
    let mut shift = 0;
    loop {
        let byte = bytes[*offset];
        *offset += 1;
        value |= ((byte & 0x7f) as usize) << shift;
        if byte < 0x80 {
            return value;
        }
        shift += 7;
        assert!(shift < usize::BITS, "a row length's varint is too long");
    }
}

/// A walk over rows in order, rebuilding each sort key.
/// How many leading bytes `a` and `b` share, eight at a time (a row shares most of its sort
/// key with the one before, and a byte-by-byte count was most of a merge's cost).
fn shared_prefix_len(a: &[u8], b: &[u8]) -> usize {
    let len = a.len().min(b.len());
    let mut shared = 0;
    for (a_word, b_word) in a[..len].chunks_exact(8).zip(b[..len].chunks_exact(8)) {
        let (a_word, b_word) =
            (u64::from_le_bytes(a_word.try_into().expect("8 bytes")), u64::from_le_bytes(b_word.try_into().expect("8 bytes")));
        let differ = a_word ^ b_word;
        if differ != 0 {
            return shared + (differ.trailing_zeros() / 8) as usize;
        }
        shared += 8;
    }
    shared + a[shared..len].iter().zip(&b[shared..len]).take_while(|(a, b)| a == b).count()
}

pub(super) struct Cursor<'r> {
    rows: &'r Rows,
    /// Where the next row starts in `rows.bytes`.
    offset: usize,
    /// The index of the row in `sort` (`usize::MAX` before the first).
    index: usize,
    sort: Vec<u8>,
    key_len: usize,
}

impl<'r> Cursor<'r> {
    /// Moves to the next row; `false` past the last.
    pub(super) fn advance(&mut self) -> bool {
        let next = self.index.wrapping_add(1);
        if next >= self.rows.len {
            return false;
        }
        let bytes: &[u8] = &self.rows.bytes;
        let shared = get_varint(bytes, &mut self.offset);
        let rest = get_varint(bytes, &mut self.offset);
        assert!(shared <= self.sort.len(), "a row shares at most the previous sort key");
        self.sort.truncate(shared);
        self.sort.extend_from_slice(&bytes[self.offset..self.offset + rest]);
        self.offset += rest;
        self.key_len = if self.rows.ordered { get_varint(bytes, &mut self.offset) } else { self.sort.len() };
        self.index = next;
        true
    }

    /// Moves past the rows of the block that starts at the next row, without reading them,
    /// when `skip` says so for the range of their indexes; `false` where the next row does not
    /// start a block (or there is none) or `skip` declines. The next `advance` reads the block
    /// after (whose first row is whole).
    pub(super) fn skip_block_if(&mut self, skip: impl FnOnce(std::ops::Range<usize>) -> bool) -> bool {
        let next = self.index.wrapping_add(1);
        if next >= self.rows.len || !next.is_multiple_of(RESTART_INTERVAL) {
            return false;
        }
        let end = (next + RESTART_INTERVAL).min(self.rows.len);
        if !skip(next..end) {
            return false;
        }
        let block = next / RESTART_INTERVAL;
        self.offset = self.rows.restarts.get(block + 1).map_or(self.rows.bytes.len(), |offset| *offset as usize);
        self.index = end - 1;
        self.sort.clear();
        self.key_len = 0;
        true
    }

    /// The current row's index.
    pub(super) fn index(&self) -> usize {
        self.index
    }

    /// The current row's sort key.
    pub(super) fn sort(&self) -> &[u8] {
        &self.sort
    }

    /// Where the current row's primary key starts in its sort key.
    pub(super) fn key_start(&self) -> usize {
        self.sort.len() - self.key_len
    }

    /// The current row's primary key.
    pub(super) fn key(&self) -> &[u8] {
        &self.sort[self.key_start()..]
    }
}

impl Rows {
    /// No rows; `ordered`: sort keys have order components before the primary key.
    pub(super) fn new(ordered: bool) -> Rows {
        Rows { bytes: SmallVec::new(), restarts: SmallVec::new(), len: 0, last: Vec::new(), ordered }
    }

    /// No rows of the same kind, with room for about `bytes` bytes.
    pub(super) fn with_capacity_like(&self, bytes: usize) -> Rows {
        Rows { bytes: SmallVec::with_capacity(bytes), ..Rows::new(self.ordered) }
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Bytes the rows take in their buffer.
    pub(super) fn bytes_len(&self) -> usize {
        self.bytes.len()
    }

    /// A walk from the row at `index` (rounded down to a restart); the first `advance` moves
    /// to that restart row.
    fn cursor_at_restart(&self, restart: usize) -> Cursor<'_> {
        let offset = self.restarts.get(restart).map_or(self.bytes.len(), |offset| *offset as usize);
        let index = (restart * RESTART_INTERVAL).wrapping_sub(1);
        Cursor { rows: self, offset, index, sort: Vec::new(), key_len: 0 }
    }

    /// A walk positioned on row `index` (which must exist).
    pub(super) fn cursor_at(&self, index: usize) -> Cursor<'_> {
        assert!(index < self.len, "row {index} of {}", self.len);
        let mut cursor = self.cursor_at_restart(index / RESTART_INTERVAL);
        while cursor.index.wrapping_add(1) <= index {
            cursor.advance();
        }
        cursor
    }

    /// A walk from the first row: call `advance` before each.
    pub(super) fn cursor(&self) -> Cursor<'_> {
        self.cursor_at_restart(0)
    }

    /// Row `index`'s sort key.
    #[cfg(test)]
    fn sort(&self, index: usize) -> Vec<u8> {
        self.cursor_at(index).sort
    }

    /// Row `index`'s primary key.
    pub(super) fn key(&self, index: usize) -> Vec<u8> {
        let cursor = self.cursor_at(index);
        cursor.key().to_vec()
    }

    /// The primary keys of the rows in `range`.
    pub(super) fn keys(&self, range: std::ops::Range<usize>) -> Vec<Box<[u8]>> {
        let mut keys = Vec::with_capacity(range.len());
        if range.is_empty() {
            return keys;
        }
        let mut cursor = self.cursor_at(range.start);
        keys.push(Box::from(cursor.key()));
        while keys.len() < range.len() && cursor.advance() {
            keys.push(Box::from(cursor.key()));
        }
        assert_eq!(keys.len(), range.len(), "a range within the rows");
        keys
    }

    /// The last row's sort key.
    pub(super) fn last(&self) -> Option<&[u8]> {
        (self.len > 0).then_some(&self.last[..])
    }

    /// Appends a row whose primary key starts at `key_start` in `sort`; rows are pushed in
    /// strictly increasing order.
    pub(super) fn push(&mut self, sort: &[u8], key_start: usize) {
        debug_assert!(self.last().is_none_or(|last| sort_key::compare(last, sort).is_lt()), "rows in strictly increasing order");
        let shared = shared_or_restart(self.len, self.bytes.len(), &mut self.restarts, &self.last, sort);
        put_row(&mut self.bytes, sort, key_start, shared, self.ordered);
        self.last.truncate(shared);
        self.last.extend_from_slice(&sort[shared..]);
        self.len += 1;
    }

    /// Rows of the same kind holding `rows` (sort keys in strictly increasing order, each with
    /// where its primary key starts), and nothing else: what a result rewritten whole becomes.
    /// They are written in one pass into a plain vector, each coded against the one before
    /// where it lies, without [`Rows::push`]'s copy of every row's sort key and checks of the
    /// small vector (a million rows per commit in the live table's case 3).
    pub(super) fn sorted_like<'s>(&self, rows: impl ExactSizeIterator<Item = (&'s [u8], usize)>) -> Rows {
        // Rows share most of their sort keys with the one before: a guess, made exact below.
        let mut bytes: Vec<u8> = Vec::with_capacity(rows.len().saturating_mul(ROW_BYTES_GUESS));
        let mut restarts = SmallVec::with_capacity(rows.len().div_ceil(RESTART_INTERVAL));
        let mut previous: &[u8] = &[];
        let mut len = 0;
        for (index, (sort, key_start)) in rows.enumerate() {
            debug_assert!(index == 0 || sort_key::compare(previous, sort).is_lt(), "rows in strictly increasing order");
            let shared = shared_or_restart(index, bytes.len(), &mut restarts, previous, sort);
            put_row(&mut bytes, sort, key_start, shared, self.ordered);
            previous = sort;
            len += 1;
        }
        bytes.shrink_to_fit(); // a result lives as long as its subscription
        Rows { bytes: SmallVec::from_vec(bytes), restarts, len, last: previous.to_vec(), ordered: self.ordered }
    }

    /// The position of `sort`, or where it would go.
    pub(super) fn search(&self, sort: &[u8]) -> Result<usize, usize> {
        // The last restart row not after `sort`: the row, if present, is in its block.
        let restart_row = |restart: usize| {
            let mut offset = self.restarts[restart] as usize;
            let shared = get_varint(&self.bytes, &mut offset);
            debug_assert_eq!(shared, 0, "a restart row is whole");
            let rest = get_varint(&self.bytes, &mut offset);
            &self.bytes[offset..offset + rest]
        };
        let (mut low, mut high) = (0, self.restarts.len());
        while low < high {
            let middle = low + (high - low) / 2;
            match sort_key::compare(restart_row(middle), sort) {
                Ordering::Less => low = middle + 1,
                Ordering::Greater => high = middle,
                Ordering::Equal => return Ok(middle * RESTART_INTERVAL),
            }
        }
        let Some(restart) = low.checked_sub(1) else { return Err(0) };
        let mut cursor = self.cursor_at_restart(restart);
        while cursor.index.wrapping_add(1) < self.len.min((restart + 1) * RESTART_INTERVAL) {
            cursor.advance();
            match sort_key::compare(cursor.sort(), sort) {
                Ordering::Less => {}
                Ordering::Equal => return Ok(cursor.index),
                Ordering::Greater => return Err(cursor.index),
            }
        }
        Err(self.len.min((restart + 1) * RESTART_INTERVAL))
    }

    /// Finds each of `sorts` (ascending, each at most once) among the rows, as [`Rows::search`]
    /// finds one, in one walk of the rows, and calls `found(i, position)` for each `sorts[i]`
    /// that is a row, in order: for a commit that moves many of a result's rows, one walk
    /// costs less than a search for each (a search walks up to [`RESTART_INTERVAL`] rows after
    /// its binary search).
    pub(super) fn find_sorted(&self, sorts: &[&[u8]], mut found: impl FnMut(usize, usize)) {
        debug_assert!(sorts.windows(2).all(|pair| sort_key::compare(pair[0], pair[1]).is_lt()), "sort keys ascending, each once");
        let mut next = 0;
        let mut cursor = self.cursor();
        'rows: while next < sorts.len() && cursor.advance() {
            loop {
                match sort_key::compare(sorts[next], cursor.sort()) {
                    // Before this row and after the previous one: not a row.
                    Ordering::Less => {}
                    Ordering::Equal => found(next, cursor.index()),
                    Ordering::Greater => continue 'rows,
                }
                next += 1;
                if next == sorts.len() {
                    break 'rows;
                }
            }
        }
    }

    /// Keeps the first `len` rows.
    pub(super) fn truncate(&mut self, len: usize) {
        if len >= self.len {
            return;
        }
        if len == 0 {
            *self = Rows::new(self.ordered);
            return;
        }
        let cursor = self.cursor_at(len - 1);
        let (end, last) = (cursor.offset, cursor.sort);
        self.bytes.truncate(end);
        self.restarts.truncate(len.div_ceil(RESTART_INTERVAL));
        self.last = last;
        self.len = len;
    }

    /// Gives back the buffers' spare room: a result lives as long as its subscription.
    pub(super) fn shrink_to_fit(&mut self) {
        self.bytes.shrink_to_fit();
        self.restarts.shrink_to_fit();
        self.last.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `count` ordered rows: a number-like order part shared by pairs, then a key.
    fn sample(count: usize) -> (Rows, Vec<(Vec<u8>, usize)>) {
        let mut rows = Rows::new(true);
        let mut expected = Vec::new();
        for index in 0..count {
            let mut sort = vec![0x02, 0x40, (index / 2) as u8];
            let key_start = sort.len();
            sort.extend_from_slice(format!("title{index:04}").as_bytes());
            rows.push(&sort, key_start);
            expected.push((sort, key_start));
        }
        (rows, expected)
    }

    #[test]
    fn rows_written_whole_are_the_rows_pushed_one_by_one() {
        for count in [0, 1, 2, 15, 16, 17, 33, 200] {
            let (pushed, expected) = sample(count);
            let whole = Rows::new(true).sorted_like(expected.iter().map(|(sort, key_start)| (&sort[..], *key_start)));
            assert_eq!(whole.bytes[..], pushed.bytes[..], "{count} rows");
            assert_eq!(whole.restarts[..], pushed.restarts[..]);
            assert_eq!((whole.len(), whole.last()), (pushed.len(), pushed.last()));
            // They take further rows as pushed rows do.
            let (mut whole, mut pushed) = (whole, pushed);
            let next = [0x02, 0x40, 0xff, b'z'];
            whole.push(&next, 3);
            pushed.push(&next, 3);
            assert_eq!((whole.bytes[..].to_vec(), whole.len()), (pushed.bytes[..].to_vec(), pushed.len()));
        }
        let unordered = Rows::new(false).sorted_like([(&b"a"[..], 0), (&b"b"[..], 0)].into_iter());
        assert_eq!(unordered.keys(0..2), vec![Box::from(&b"a"[..]), Box::from(&b"b"[..])]);
    }

    #[test]
    fn rows_give_back_every_sort_key_and_primary_key() {
        for count in [0, 1, 15, 16, 17, 40] {
            let (rows, expected) = sample(count);
            assert_eq!(rows.len(), count);
            let mut cursor = rows.cursor();
            for (index, (sort, key_start)) in expected.iter().enumerate() {
                assert!(cursor.advance());
                assert_eq!((cursor.sort(), cursor.key_start()), (&sort[..], *key_start));
                assert_eq!(rows.sort(index), *sort);
                assert_eq!(rows.key(index), sort[*key_start..]);
                assert_eq!(rows.search(sort), Ok(index), "row {index} of {count}");
                // Just after it, before the next row.
                assert_eq!(rows.search(&[&sort[..], &[0]].concat()), Err(index + 1));
            }
            assert!(!cursor.advance());
            assert_eq!(rows.search(&[0x03]), Err(count));
            assert_eq!(rows.last(), expected.last().map(|(sort, _)| &sort[..]));
            if count > 2 {
                assert_eq!(rows.keys(1..3), vec![Box::from(rows.key(1)), Box::from(rows.key(2))]);
            }
        }
    }

    #[test]
    fn one_walk_finds_what_a_search_for_each_finds() {
        for count in [0, 1, 15, 16, 17, 40] {
            let (rows, expected) = sample(count);
            // Every row, every other row, rows with keys between them, keys past the end.
            let mut probes: Vec<Vec<u8>> = expected.iter().map(|(sort, _)| sort.clone()).collect();
            probes.extend(expected.iter().map(|(sort, _)| [&sort[..], &[0]].concat()));
            probes.extend([vec![0x01], vec![0x03], vec![0x02, 0x40]]);
            probes.sort_by(|a, b| sort_key::compare(a, b));
            for step in [1, 2, 3] {
                let chosen: Vec<&[u8]> = probes.iter().step_by(step).map(Vec::as_slice).collect();
                let mut walked = vec![None; chosen.len()];
                rows.find_sorted(&chosen, |probe, position| walked[probe] = Some(position));
                let searched: Vec<Option<usize>> = chosen.iter().map(|sort| rows.search(sort).ok()).collect();
                assert_eq!(walked, searched, "{count} rows, every {step}th probe");
            }
        }
    }

    #[test]
    fn truncated_rows_take_new_rows_after_them() {
        for (count, keep) in [(40, 17), (40, 16), (40, 1), (40, 0), (5, 9)] {
            let (mut rows, expected) = sample(count);
            rows.truncate(keep);
            let kept = keep.min(count);
            assert_eq!(rows.len(), kept);
            assert_eq!(rows.last(), kept.checked_sub(1).map(|last| &expected[last].0[..]));
            for (sort, key_start) in &expected[kept..] {
                rows.push(sort, *key_start);
            }
            for (index, (sort, _)) in expected.iter().enumerate() {
                assert_eq!(rows.sort(index), *sort, "keep {keep}, row {index}");
            }
        }
    }

    #[test]
    fn unordered_rows_are_their_keys() {
        let mut rows = Rows::new(false);
        rows.push(b"a", 0);
        rows.push(b"ab", 0);
        assert_eq!((rows.key(1), rows.sort(1)), (b"ab".to_vec(), b"ab".to_vec()));
        assert_eq!(rows.search(b"aa"), Err(1));
    }

    #[test]
    #[should_panic(expected = "an unordered result's sort key is its primary key")]
    fn an_unordered_row_has_no_order_components() {
        Rows::new(false).push(b"\x02akey", 2);
    }

    #[test]
    fn shared_prefixes_are_counted_to_the_first_difference() {
        let long: Vec<u8> = (0..40).collect();
        for cut in 0..=40 {
            let mut other = long.clone();
            if cut < 40 {
                other[cut] ^= 0x10;
            }
            assert_eq!(shared_prefix_len(&long, &other), cut, "differs at {cut}");
            assert_eq!(shared_prefix_len(&long[..cut], &long), cut, "a prefix of {cut}");
        }
        assert_eq!(shared_prefix_len(b"", b"abc"), 0);
    }

    #[test]
    fn varints_round_trip() {
        for value in [0, 1, 127, 128, 300, 16_383, 16_384, u32::MAX as usize] {
            let mut out: SmallVec<[u8; INLINE_BYTES]> = SmallVec::new();
            put_varint(&mut out, value);
            let mut offset = 0;
            assert_eq!((get_varint(&out, &mut offset), offset), (value, out.len()));
            let mut plain = Vec::new();
            put_varint(&mut plain, value);
            assert_eq!(plain[..], out[..]);
        }
    }
}
