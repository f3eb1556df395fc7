//! [`Repr`]: where a value's data is, as the reader, the validator and the encoder share it.

/// Where a value's data is: inline in its slot, an item at a byte position, a number of a
/// packed array, or one row of a packed matrix.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Repr {
    Null,
    Bool(bool),
    Int(i64),
    Item(usize),
    /// An element of a packed float array.
    Float(f64),
    /// Row `row` of the packed matrix item at `matrix`.
    Row {
        matrix: usize,
        row: u32,
    },
}
