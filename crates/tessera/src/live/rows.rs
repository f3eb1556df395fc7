//! A live result's rows, compactly: each row's sort key (the order's components, then the
//! primary key) back to back in one buffer, in result order, and nothing else. No decoded
//! record is kept: a delivery takes its records from the commit's batch (rows it changed),
//! the previous delivery (rows it did not) or storage (see `state.rs`).
//!
//! An unordered query's sort key is the primary key alone, so its rows cost their keys and a
//! 4-byte offset each; an ordered query's rows add the order components and a 2-byte key
//! length.

use crate::collection::sort_key;

/// The most bytes of sort keys one result holds: row offsets are 32-bit.
pub(super) const ROWS_BYTES_MAX: usize = u32::MAX as usize;
/// The longest primary key a row holds (stored keys are at most 511 bytes).
pub(super) const KEY_LEN_MAX: usize = u16::MAX as usize;

/// Sort keys of a result in order (see the module docs).
pub(super) struct Rows {
    bytes: Vec<u8>,
    /// Where each row's sort key ends in `bytes`.
    ends: Vec<u32>,
    /// Each row's primary key length when sort keys have order components; empty otherwise
    /// (the sort key is the primary key).
    key_lens: Vec<u16>,
    ordered: bool,
}

impl Rows {
    /// No rows; `ordered`: sort keys have order components before the primary key.
    pub(super) fn new(ordered: bool) -> Rows {
        Rows { bytes: Vec::new(), ends: Vec::new(), key_lens: Vec::new(), ordered }
    }

    /// No rows, with room for `rows` rows of `bytes` bytes of sort keys together.
    pub(super) fn with_capacity(ordered: bool, rows: usize, bytes: usize) -> Rows {
        let key_lens = if ordered { Vec::with_capacity(rows) } else { Vec::new() };
        Rows { bytes: Vec::with_capacity(bytes), ends: Vec::with_capacity(rows), key_lens, ordered }
    }

    /// No rows of the same kind, with room as [`Rows::with_capacity`].
    pub(super) fn with_capacity_like(&self, rows: usize, bytes: usize) -> Rows {
        Rows::with_capacity(self.ordered, rows, bytes)
    }

    pub(super) fn len(&self) -> usize {
        self.ends.len()
    }

    fn start(&self, index: usize) -> usize {
        if index == 0 {
            0
        } else {
            self.ends[index - 1] as usize
        }
    }

    /// Row `index`'s sort key.
    pub(super) fn sort(&self, index: usize) -> &[u8] {
        &self.bytes[self.start(index)..self.ends[index] as usize]
    }

    /// Row `index`'s primary key (the tail of its sort key).
    pub(super) fn key(&self, index: usize) -> &[u8] {
        let end = self.ends[index] as usize;
        match self.ordered {
            true => &self.bytes[end - self.key_lens[index] as usize..end],
            false => &self.bytes[self.start(index)..end],
        }
    }

    /// The last row's sort key.
    pub(super) fn last(&self) -> Option<&[u8]> {
        self.len().checked_sub(1).map(|index| self.sort(index))
    }

    /// Appends a row whose primary key starts at `key_start` in `sort`; rows are pushed in
    /// order.
    pub(super) fn push(&mut self, sort: &[u8], key_start: usize) {
        assert!(key_start <= sort.len(), "the primary key is the sort key's tail");
        assert!(self.ordered || key_start == 0, "an unordered result's sort key is its primary key");
        assert!(self.bytes.len() + sort.len() <= ROWS_BYTES_MAX, "a live result's sort keys exceed {ROWS_BYTES_MAX} bytes");
        debug_assert!(self.last().is_none_or(|last| sort_key::compare(last, sort).is_lt()), "rows in strictly increasing order");
        self.bytes.extend_from_slice(sort);
        self.ends.push(self.bytes.len() as u32);
        if self.ordered {
            let key_len = sort.len() - key_start;
            assert!(key_len <= KEY_LEN_MAX, "a primary key of {key_len} bytes");
            self.key_lens.push(key_len as u16);
        }
    }

    /// Appends row `index` of `other`.
    pub(super) fn push_from(&mut self, other: &Rows, index: usize) {
        let sort = other.sort(index);
        self.push(sort, sort.len() - other.key(index).len());
    }

    /// The position of `sort`, or where it would go.
    pub(super) fn search(&self, sort: &[u8]) -> std::result::Result<usize, usize> {
        let (mut low, mut high) = (0, self.len());
        while low < high {
            let middle = low + (high - low) / 2;
            match sort_key::compare(self.sort(middle), sort) {
                std::cmp::Ordering::Less => low = middle + 1,
                std::cmp::Ordering::Greater => high = middle,
                std::cmp::Ordering::Equal => return Ok(middle),
            }
        }
        Err(low)
    }

    /// Keeps the first `len` rows.
    pub(super) fn truncate(&mut self, len: usize) {
        if len < self.len() {
            self.bytes.truncate(self.start(len));
            self.ends.truncate(len);
            self.key_lens.truncate(len);
        }
    }

    /// Gives back the buffers' spare room: a result lives as long as its subscription.
    pub(super) fn shrink_to_fit(&mut self) {
        self.bytes.shrink_to_fit();
        self.ends.shrink_to_fit();
        self.key_lens.shrink_to_fit();
    }

    /// Bytes of sort keys held.
    pub(super) fn bytes_len(&self) -> usize {
        self.bytes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_give_back_their_sort_keys_and_primary_keys() {
        let mut ordered = Rows::new(true);
        ordered.push(b"\x02aakey1", 3);
        ordered.push(b"\x02abkey22", 3);
        ordered.push(b"\x03k", 2);
        assert_eq!((ordered.sort(1), ordered.key(1)), (&b"\x02abkey22"[..], &b"key22"[..]));
        assert_eq!(ordered.key(2), b"k");
        assert_eq!(ordered.search(b"\x02abkey22"), Ok(1));
        assert_eq!(ordered.search(b"\x02ab"), Err(1));
        assert_eq!(ordered.search(b"\x04"), Err(3));
        ordered.truncate(1);
        assert_eq!((ordered.len(), ordered.bytes_len(), ordered.last()), (1, 7, Some(&b"\x02aakey1"[..])));
        let mut copy = ordered.with_capacity_like(1, 7);
        copy.push_from(&ordered, 0);
        assert_eq!(copy.key(0), b"key1");

        let mut unordered = Rows::with_capacity(false, 2, 4);
        unordered.push(b"a", 0);
        unordered.push(b"bc", 0);
        assert_eq!((unordered.key(1), unordered.sort(1)), (&b"bc"[..], &b"bc"[..]));
        assert_eq!(unordered.search(b"b"), Err(1));
    }

    #[test]
    #[should_panic(expected = "an unordered result's sort key is its primary key")]
    fn an_unordered_row_has_no_order_components() {
        Rows::new(false).push(b"\x02akey", 2);
    }
}
